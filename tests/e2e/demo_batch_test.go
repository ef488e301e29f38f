package e2e

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentplane/agentplane/tests/internal/runs"
	"github.com/agentplane/agentplane/tests/internal/stack"
	"github.com/agentplane/agentplane/tools/demo/scenario"
	"github.com/agentplane/agentplane/tools/fakevendor"
)

var (
	// vendor is the fake vendor server the demo's batch run is answered
	// by; pollerLog is batch-poller's log.
	vendor    *fakevendor.Server
	pollerLog string
)

// startBatch starts the fake vendor server (accepting the demo recipe's
// key) and batch-poller as the demo does, and returns the agent-controller's
// batch flags and what stops both.
func startBatch(ctx context.Context, work string) ([]string, func(), error) {
	vendor = fakevendor.New(fakevendor.Options{APIKey: scenario.BatchAPIKey, PollsUntilEnded: 2})
	vendorURL, err := vendor.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("fakevendor: %w", err)
	}
	pollerAuth, controllerAuth, err := stack.BatchCaller(ctx, env.Kube)
	if err != nil {
		_ = vendor.Close()
		return nil, nil, err
	}
	addrs, err := stack.FreeAddrs(2)
	if err != nil {
		_ = vendor.Close()
		return nil, nil, err
	}
	pollerLog = filepath.Join(work, "batch-poller.log")
	p, err := stack.StartProcess(ctx, pollerLog, filepath.Join(binDir, "batch-poller"), append([]string{
		"--grpc-bind-address", addrs[0], "--metrics-bind-address", addrs[1], "--health-probe-bind-address", addrs[1],
		"--kubeconfig", kubeconfig, "--batch-poll-seconds", "0.5",
		"--anthropic-base-url", vendorURL + "/", "--openai-base-url", vendorURL + "/v1/", "--gemini-base-url", vendorURL + "/"},
		append(pollerAuth, natsAuth.ServiceArgs()...)...)...)
	if err == nil {
		err = stack.WaitListening(addrs[0], p)
	}
	if err != nil {
		_ = vendor.Close()
		return nil, nil, fmt.Errorf("batch-poller: %w", err)
	}
	stop := func() {
		p.Stop()
		_ = vendor.Close()
	}
	return append([]string{"--batch-enabled", "--batch-poller-address", addrs[0], "--batch-poll-seconds", "1"}, controllerAuth...), stop, nil
}

// TestTheDemoBatchRun runs the demo's batch phase (tools/demo/scenario):
// the run reaches each stage the demo shows, in order, keeps its recipe's
// promise, and leaves nothing at the provider.
func TestTheDemoBatchRun(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	if err := scenario.ApplyBatch(ctx, env.Client, ns, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, st := range scenario.BatchStages {
		a := runs.WaitFor(t, env.Client, ns, scenario.BatchRun, 90*time.Second, st.What, st.Reached, nil)
		t.Logf("%s: %s", st.What, st.Show(a))
	}
	a := runs.WaitFor(t, env.Client, ns, scenario.BatchRun, time.Second, "cleaned up", scenario.BatchStages[len(scenario.BatchStages)-1].Reached, nil)
	if why := scenario.CheckBatch(a); why != "" {
		t.Error(why)
	}
	if live := vendor.Live()[string(a.Status.BatchProvider)]; slices.Contains(live, a.Status.BatchID) {
		t.Errorf("batch %s is still held at %s after the cleanup: %v", a.Status.BatchID, a.Status.BatchProvider, live)
	}
}
