package e2e

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentplane/agentplane/tests/internal/stack"
	"github.com/agentplane/agentplane/tools/demo/scenario"
)

// omniaLog is omnia-controllers' log.
var omniaLog string

// startOmnia starts omnia-controllers with the agent pods running
// mockagent's Omnia runtime and facade stand-ins (BinDir is open to their
// user), on the host network, where the demo runs them from the mockagent
// image.
func startOmnia(ctx context.Context, work string) (func(), error) {
	addrs, err := stack.FreeAddrs(1)
	if err != nil {
		return nil, err
	}
	omniaLog = filepath.Join(work, "omnia-controllers.log")
	p, err := stack.StartProcess(ctx, omniaLog, filepath.Join(binDir, "omnia-controllers"),
		"--kubeconfig", kubeconfig, "--leader-elect=false", "--metrics-bind-address", addrs[0], "--health-probe-bind-address", addrs[0],
		"--runtime-image", "agentplane/omnia-runtime:e2e", "--runtime-command", filepath.Join(binDir, "mockagent")+",omnia-runtime",
		"--facade-image", "agentplane/omnia-facade:e2e", "--facade-command", filepath.Join(binDir, "mockagent")+",omnia-facade",
		"--provider-credential-probe=false")
	if err == nil {
		err = stack.WaitListening(addrs[0], p)
	}
	if err != nil {
		return nil, fmt.Errorf("omnia-controllers: %w", err)
	}
	return p.Stop, nil
}

// waitOmnia polls the demo's AgentRuntime in ns until it reaches st.
func waitOmnia(t *testing.T, ns string, st scenario.OmniaStage, within time.Duration) scenario.OmniaState {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s, err := scenario.ReadOmnia(context.Background(), env.Client, ns)
		if err == nil && st.Reached(s) {
			t.Logf("%s: %s", st.What, st.Show(s))
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("agentruntime %s/%s not %s after %s (last error %v): %s", ns, scenario.OmniaRuntime, st.What, within, err, s.Describe())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTheDemoOmniaRollout runs the demo's Omnia phase
// (tools/demo/scenario): the AgentRuntime goes Running on the first pack
// version, and a new version is rolled out through each step the demo
// shows: triggered, half the replicas on the candidate, promoted, and
// every replica on it with the candidate Deployment gone.
func TestTheDemoOmniaRollout(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	if err := scenario.ApplyOmnia(ctx, env.Client, ns, io.Discard); err != nil {
		t.Fatal(err)
	}
	waitOmnia(t, ns, scenario.OmniaRunning, 2*time.Minute)
	if err := scenario.PublishNextPack(ctx, env.Client, ns, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, st := range scenario.OmniaRolloutStages {
		waitOmnia(t, ns, st, 2*time.Minute)
	}
}
