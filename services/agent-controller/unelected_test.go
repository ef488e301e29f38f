package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
)

// TestWithoutElectionTheReplicaIsLeader runs the binary's run loop with
// --leader-elect=false: the replica reconciles (a run without its Station
// fails), and /metrics says controller_is_leader 1 while it does, as it
// would for an elected leader, next to client-go's workqueue and REST
// client metrics.
func TestWithoutElectionTheReplicaIsLeader(t *testing.T) {
	raw, err := env.KubeconfigFor("unelected")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	metricsAddr := testenv.FreeAddr(t)
	startRun(t,
		"--kubeconfig="+kubeconfig, "--pod-name=unelected", "--pod-namespace="+ns, "--watch-namespace="+ns,
		"--metrics-bind-address="+metricsAddr, "--health-probe-bind-address="+testenv.FreeAddr(t), "--shutdown-timeout=5s",
		"--leader-elect=false", "--poll-interval=1s")

	a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: ns}, Spec: agentsv1alpha1.AgentSpec{StationRef: "missing"}}
	if err := env.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replica reconciling", phaseIs(ns, "orphan", agentsv1alpha1.PhaseFailed))
	eventually(t, "controller_is_leader 1 on /metrics", func() error {
		body, err := scrape(metricsAddr)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "controller_is_leader ") {
				if line != "controller_is_leader 1" {
					return fmt.Errorf("reads %q", line)
				}
				return nil
			}
		}
		return fmt.Errorf("no controller_is_leader in %d bytes of /metrics", len(body))
	})
	// client-go's own metrics are served too: the controller's queue, by
	// its name, and the REST client's calls to the API server.
	eventually(t, "workqueue and REST client metrics on /metrics", func() error {
		body, err := scrape(metricsAddr)
		if err != nil {
			return err
		}
		for _, want := range []string{`workqueue_adds_total{controller="agents",name="agents"}`, `rest_client_requests_total{code="200",`} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("no %s in %d bytes of /metrics", want, len(body))
			}
		}
		return nil
	})
}

// scrape reads the /metrics page served at addr.
func scrape(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}
