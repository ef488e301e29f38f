package batch

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/tools/fakevendor"
)

// TestBenchBatchCompletionToSucceeded measures the time from the vendor
// finishing a batch to its Agent being Succeeded, end to end (fakevendor →
// batch-poller poll → NATS notice → agent-controller → status patch), for
// N runs in flight at once. Baseline: batch-poller's poll period, the wait
// a notice-less design would add on average is half of it, at most all of
// it. Runs only under `make bench` (AGENTPLANE_BENCH=1).
func TestBenchBatchCompletionToSucceeded(t *testing.T) {
	if os.Getenv(testenv.BenchEnv) == "" {
		t.Skip("benchmark: set " + testenv.BenchEnv + "=1 (make bench)")
	}
	n := 200
	if v, err := strconv.Atoi(os.Getenv("AGENTPLANE_BENCH_N")); err == nil && v > 0 {
		n = min(v, 2000)
	}
	const delay = 4 * time.Second
	configureVendor(t, func(o *fakevendor.Options) { o.Delay = delay; o.PollsUntilEnded = 0 })
	ns := namespace(t)
	recipe(t, ns, "bench", recipeOpts{})
	wc, err := client.NewWithWatch(suite.Env.Config, client.Options{Scheme: suite.Env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &agentsv1alpha1.AgentList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			launch(t, ns, fmt.Sprintf("b-%04d", i), "bench", "")
		}()
	}
	// Status times have one-second resolution, so the times are taken
	// here as the watch delivers them: submitted (batchId first seen) and
	// Succeeded. The vendor ends a batch Delay after its creation, which
	// the submit patch follows within milliseconds.
	submitted := map[string]time.Time{}
	finished := map[string]bool{}
	var lat []time.Duration
	timeout := time.After(5 * time.Minute)
	for len(lat) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			a, ok := ev.Object.(*agentsv1alpha1.Agent)
			if !ok {
				continue
			}
			now := time.Now()
			if _, seen := submitted[a.Name]; !seen && a.Status.BatchID != "" {
				submitted[a.Name] = now
			}
			if at, seen := submitted[a.Name]; seen && !finished[a.Name] && a.Status.Phase == agentsv1alpha1.PhaseSucceeded {
				finished[a.Name] = true
				lat = append(lat, now.Sub(at.Add(delay)))
			}
		case <-timeout:
			t.Fatalf("%d of %d batch runs Succeeded after 5 minutes", len(lat), n)
		}
	}
	wg.Wait()
	slices.Sort(lat)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	testenv.BenchReport(t, fmt.Sprintf("| batch: vendor completion → Agent Succeeded, %d runs in flight, batch-poller period %s | p50 %s (%.2f× period) | p99 %s (%.2f× period) | watch-observed times |",
		n, pollPeriod, p50.Round(time.Millisecond), p50.Seconds()/pollPeriod.Seconds(), p99.Round(time.Millisecond), p99.Seconds()/pollPeriod.Seconds()))
}
