package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/service/servicetest"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/agentruntime"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/connection"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/promptpack"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/provider"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/sandboxclass"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/skillsource"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/toolpolicy"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/toolregistry"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/workspace"
)

var env *testenv.Env

// controllerNames are the controllers the binary runs.
var controllerNames = []string{agentruntime.ControllerName, promptpack.ControllerName, toolregistry.ControllerName, provider.ControllerName,
	workspace.ControllerName, skillsource.ControllerName, toolpolicy.ControllerName, sandboxclass.ControllerName, connection.ControllerName}

// OwnerReferencesPermissionEnforcement is on, as in OpenShift, so the
// installed RBAC is checked for the owner finalizers blockOwnerDeletion
// needs.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{APIServerArgs: map[string]string{
		"enable-admission-plugins": "OwnerReferencesPermissionEnforcement"}}))
}

func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// startRun runs the binary's run against rc in the background, as the
// binary would with args and free metrics and probe addresses, until
// cancel is called; done then receives run's result.
func startRun(t *testing.T, rc *rest.Config, args ...string) (*config, context.Context, context.CancelFunc, <-chan error) {
	t.Helper()
	args = append([]string{"--metrics-bind-address=" + testenv.FreeAddr(t), "--health-probe-bind-address=" + testenv.FreeAddr(t)}, args...)
	cfg, err := parseConfig(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.repeatedInProcess = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, rc) }()
	return cfg, ctx, cancel, done
}

// answersOK is a condition for eventually: a GET of url answers 200.
func answersOK(url string) func() error {
	return func() error {
		code, body, err := httpGet(url)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	}
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	ctrltest.Eventually(t, 30*time.Second, func() error {
		if err := cond(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

// TestRunWiring starts the whole binary's manager: it takes the Lease under
// the pod's name, serves /readyz and /metrics (with the build info), reconciles, and on cancellation (SIGTERM)
// stops cleanly and releases the Lease for a standby.
func TestRunWiring(t *testing.T) {
	ns := env.Namespace(t)
	cfg, ctx, cancel, done := startRun(t, env.Config,
		"--leader-election-namespace="+ns, "--leader-election-id=omnia-test", "--shutdown-timeout=5s", "--pod-name=omnia-pod-1")
	defer cancel()

	eventually(t, "readyz", answersOK("http://"+cfg.HealthProbeBindAddress+"/readyz"))
	p := &omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: ns}, Spec: omniav1.PromptPackSpec{PackName: "dev", Version: "0.1.0",
		Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeLive, Live: &omniav1.LivePromptSource{URL: "http://127.0.0.1:1/pack.json"}}}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PromptPack Active", func() error {
		got := &omniav1.PromptPack{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "live"}, got); err != nil {
			return err
		}
		if got.Status.Phase != omniav1.PromptPackPhaseActive {
			return fmt.Errorf("phase %q", got.Status.Phase)
		}
		return nil
	})
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "omnia-test"}, lease); err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "omnia-pod-1" {
		t.Fatalf("lease %+v %v", lease.Spec, err)
	}
	code, body, err := httpGet("http://" + cfg.MetricsBindAddress + "/metrics")
	if err != nil || code != http.StatusOK || !strings.Contains(body, `controller_runtime_reconcile_total{controller="promptpack"`) ||
		!strings.Contains(body, `agentplane_build_info{`) || !strings.Contains(body, `service="omnia-controllers"`) {
		t.Fatalf("metrics: %d %v", code, err)
	}
	// Every controller has its own reconcile and error series, under its
	// name (controller-runtime creates them when the controller starts).
	for _, c := range controllerNames {
		for _, want := range []string{`controller_runtime_reconcile_total{controller="` + c + `",result="success"}`,
			`controller_runtime_reconcile_errors_total{controller="` + c + `"}`} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	}
	// The omnia metrics are served beside controller-runtime's, with both
	// rollout results from the start, and every family passes promlint.
	eventually(t, "omnia metrics", func() error {
		_, body, err := httpGet("http://" + cfg.MetricsBindAddress + "/metrics")
		if err != nil {
			return err
		}
		for _, want := range []string{`omnia_promptpack_valid{namespace="` + ns + `",promptpack="live"} 1`,
			`omnia_rollouts_finished_total{result="promoted"}`, `omnia_rollouts_finished_total{result="rolled_back"}`} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("/metrics lacks %s", want)
			}
		}
		return nil
	})
	servicetest.Lint(t, ctrlmetrics.Registry)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "omnia-test"}, lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Fatalf("lease still held by %q after shutdown", *lease.Spec.HolderIdentity)
	}
}
