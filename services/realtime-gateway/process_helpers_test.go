package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/agentplane/agentplane/libs/lockedio"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
)

var (
	gatewayBinOnce sync.Once
	gatewayBin     string
	gatewayBinErr  error
)

// gatewayProcess is the realtime-gateway binary running on its own.
type gatewayProcess struct {
	cmd         *exec.Cmd
	metricsAddr string
	client      realtimev1.PromptServiceClient
}

// startGatewayProcess builds the binary once and runs it with a
// kubeconfig of the platform's ServiceAccount.
func startGatewayProcess(t *testing.T) *gatewayProcess {
	t.Helper()
	rc := platform(t)
	gatewayBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "realtime-gateway-bin-")
		if err != nil {
			gatewayBinErr = err
			return
		}
		gatewayBin = filepath.Join(dir, "realtime-gateway")
		if out, err := exec.Command("go", "build", "-o", gatewayBin, ".").CombinedOutput(); err != nil {
			gatewayBinErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if gatewayBinErr != nil {
		t.Fatal(gatewayBinErr)
	}
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
	cmd := exec.Command(gatewayBin, "--kubeconfig", kcPath, "--grpc-bind-address", grpcAddr, "--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", healthAddr, "--kube-api-qps", "500", "--kube-api-burst", "1000", "--log-level", "warn",
		"--shutdown-timeout", "1s")
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+gwNamespace)
	cmd.Stderr = &lockedio.Buffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &gatewayProcess{cmd: cmd, metricsAddr: metricsAddr}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + healthAddr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway process not ready: %v\n%s", err, cmd.Stderr.(*lockedio.Buffer).String())
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb * 1024
		}
	}
	return heap, rss, sessions
}
