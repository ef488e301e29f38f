package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/agentplane/agentplane/libs/lockedio"
	"github.com/agentplane/agentplane/libs/testenv/benchproc"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
)

// gatewayBin is this tree's realtime-gateway, built the first time a test
// runs it; TestMain removes it.
var gatewayBin = &benchproc.Binary{Pkg: "github.com/agentplane/agentplane/services/realtime-gateway"}

// gatewayProcess is the realtime-gateway binary running on its own.
type gatewayProcess struct {
	*benchproc.Process
	metricsAddr string
	client      realtimev1.PromptServiceClient
}

// startGatewayProcess builds the binary once and runs it with a
// kubeconfig of the platform's ServiceAccount.
func startGatewayProcess(t *testing.T) *gatewayProcess {
	t.Helper()
	rc := platform(t)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	kc.AuthInfos["gw"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	kc.Contexts["gw"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "gw"}
	kc.CurrentContext = "gw"
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kcPath); err != nil {
		t.Fatal(err)
	}
	grpcAddr, metricsAddr, healthAddr := closedPort(t), closedPort(t), closedPort(t)
	cmd := exec.Command(gatewayBin.Path(t), "--kubeconfig", kcPath, "--grpc-bind-address", grpcAddr, "--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", healthAddr, "--kube-api-qps", "500", "--kube-api-burst", "1000", "--log-level", "warn",
		"--shutdown-timeout", "1s")
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+gwNamespace)
	stderr := &lockedio.Buffer{}
	cmd.Stderr = stderr
	// Registered before Start's Stop, so it runs after the process ends.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway process stderr:\n%s", stderr.String())
		}
	})
	p := &gatewayProcess{Process: benchproc.Start(t, cmd), metricsAddr: metricsAddr}
	benchproc.WaitReady(t, healthAddr, 30*time.Second)
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	p.client = realtimev1.NewPromptServiceClient(conn)
	return p
}

// mem reads the process's heap in use and open Prompt streams (its own
// metrics) and its RSS.
func (p *gatewayProcess) mem(t *testing.T) (heap, rss int64, sessions int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metricsAddr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			heap = int64(f)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "realtime_gateway_sessions_active "); ok {
			sessions, _ = strconv.Atoi(v)
		}
	}
	return heap, int64(p.RSSMiB() * (1 << 20)), sessions
}
