package e2e

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/tests/internal/runs"
	"github.com/agentplane/agentplane/tests/internal/stack"
	"github.com/agentplane/agentplane/tools/demo/scenario"
)

// realtimeKeyNS holds the key the controller and the gateway share.
const realtimeKeyNS = "agentplane-system"

var (
	// gatewayAddr is realtime-gateway's gRPC address; gatewayLog its log.
	gatewayAddr, gatewayLog string
)

// startRealtime creates the realtime key Secret and starts
// realtime-gateway as the demo does, and returns the agent-controller's
// realtime flags and what stops the gateway.
func startRealtime(ctx context.Context, work string) ([]string, func(), error) {
	if err := stack.CreateRealtimeKey(ctx, env.Kube, realtimeKeyNS); err != nil {
		return nil, nil, err
	}
	addrs, err := stack.FreeAddrs(2)
	if err != nil {
		return nil, nil, err
	}
	gatewayAddr, gatewayLog = addrs[0], filepath.Join(work, "realtime-gateway.log")
	p, err := stack.StartProcess(ctx, gatewayLog, filepath.Join(binDir, "realtime-gateway"),
		"--kubeconfig", kubeconfig, "--grpc-bind-address", gatewayAddr, "--metrics-bind-address", addrs[1],
		"--health-probe-bind-address", addrs[1], "--key-secret-namespace", realtimeKeyNS, "--shutdown-timeout", "2s")
	if err == nil {
		err = stack.WaitListening(gatewayAddr, p)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("realtime-gateway: %w", err)
	}
	return []string{"--realtime-enabled", "--realtime-key-namespace", realtimeKeyNS, "--gateway-namespace", realtimeKeyNS},
		func() { p.StopWithin(15 * time.Second) }, nil
}

// TestTheDemoRealtimeSession runs the demo's realtime phase
// (tools/demo/scenario): the run goes Running, two `agentctl prompt` turns
// are answered in one session, `agentctl chat` with no lines closes it,
// and the Agent ends Succeeded with that session's id.
func TestTheDemoRealtimeSession(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	if err := scenario.ApplyRealtime(ctx, env.Client, ns, io.Discard); err != nil {
		t.Fatal(err)
	}
	runs.WaitFor(t, env.Client, ns, scenario.RealtimeRun, 90*time.Second, scenario.RealtimeRunning.What, scenario.RealtimeRunning.Reached, nil)
	var out strings.Builder
	sessions, err := scenario.Converse(ctx, scenario.Agentctl{Bin: filepath.Join(binDir, "agentctl"), Gateway: gatewayAddr,
		Global: []string{"--kubeconfig", kubeconfig, "-n", ns}}, 90*time.Second, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "closed after") {
		t.Errorf("agentctl chat did not report the session closed:\n%s", out.String())
	}
	a := runs.WaitFor(t, env.Client, ns, scenario.RealtimeRun, 60*time.Second, scenario.RealtimeEnded.What, scenario.RealtimeEnded.Reached, nil)
	if why := scenario.CheckRealtime(a, sessions); why != "" {
		t.Errorf("%s\n%s", why, out.String())
	}
}
