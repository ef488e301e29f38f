package batch

import (
	"context"
	"slices"
	"testing"
	"time"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/tests/internal/receiver"
	"github.com/agentplane/agentplane/tests/internal/runs"
	"github.com/agentplane/agentplane/tests/internal/stack"
	"github.com/agentplane/agentplane/tools/fakevendor"
)

// Sink events: agent/started after the submit patch, the CLI lines and
// agent/succeeded after the completing patch, each at most once — also when
// the leader is killed while the batch is in flight and another replica
// finishes the run, and when the killed replica comes back.
func TestSinkEventsAreSentOnceAcrossALeaderChange(t *testing.T) {
	configureVendor(t, func(o *fakevendor.Options) { o.Delay = 6 * time.Second })
	ns := namespace(t)
	s := newSink(t)
	recipe(t, ns, "watched", recipeOpts{sinkURL: s.URL})
	launch(t, ns, "a", "watched", "")
	waitFor(t, ns, "a", 30*time.Second, "submitted", func(a *agentsv1alpha1.Agent) bool { return a.Status.BatchID != "" })
	if got := s.waitLifecycles(t, "a", 1); !slices.Equal(got, []string{"agent/started"}) {
		t.Fatalf("after the submit patch the sink got %v", got)
	}

	old := leader(t)
	p, _ := replicas.Load(old)
	p.(*stack.Process).Kill()
	replicas.Delete(old)
	// The other replica takes the Lease and finishes the run.
	a := waitFor(t, ns, "a", 60*time.Second, "cleaned up", cleanedUp)
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
		t.Fatalf("status %+v", a.Status)
	}
	if now := leader(t); now == old {
		t.Logf("note: %s took the Lease back", now)
	}
	if err := startReplica(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	// Let the restarted replica and the leader look at the finished run
	// a few times: nothing more may be sent.
	time.Sleep(5 * time.Second)
	got := s.lifecycles("a")
	if !slices.Equal(got, []string{"agent/started", "agent/succeeded"}) {
		t.Errorf("sink lifecycle events %v, want agent/started and agent/succeeded once each", got)
	}
	cli := s.count("a") - len(got)
	if cli == 0 {
		t.Error("no CLI events reached the sink")
	}

	// The platform stream holds the same events once each.
	stored := runs.Stored(t, suite.NATSURL, ns, "a", natsOpts...)
	ids := map[string]bool{}
	for _, ev := range stored {
		if ids[ev.GetId()] {
			t.Errorf("event %s stored twice", ev.GetId())
		}
		ids[ev.GetId()] = true
	}
	want := receiver.Expected(stored)
	var sent []string
	for _, p := range s.Of("a") {
		sent = append(sent, p.ID)
		if p.Source.Namespace != ns || p.Source.Station != "watched" || p.Source.Pod != "" {
			t.Errorf("payload %s has source %+v, want the Agent's namespace and Station and no pod (no pod ran)", p.ID, p.Source)
		}
	}
	if !slices.Equal(sent, want) {
		t.Errorf("the sink got %v, want each line and lifecycle event of the stream once, in order: %v", sent, want)
	}
}

// Running (poll): each batch is polled at the vendor at most once every
// poll period, however often the controller looks.
func TestTheVendorIsPolledAtMostOncePerPeriod(t *testing.T) {
	configureVendor(t, func(o *fakevendor.Options) { o.Delay = 5 * time.Second; o.PollsUntilEnded = 0 })
	ns := namespace(t)
	recipe(t, ns, "cadence", recipeOpts{})
	launch(t, ns, "a", "cadence", "")
	waitFor(t, ns, "a", 30*time.Second, "submitted", func(a *agentsv1alpha1.Agent) bool { return a.Status.BatchID != "" })
	start := time.Now()
	a := waitFor(t, ns, "a", 60*time.Second, "terminal", terminal)
	elapsed := time.Since(start)
	calls := vendor.BatchCalls(a.Status.BatchID)
	// Status reads while in flight, plus the create, the results read and
	// the delete; one status read per period at most, plus one for the
	// period that straddles the end.
	limit := int(elapsed/pollPeriod) + 1 + 4
	if calls > limit {
		t.Errorf("%d vendor calls for batch %s over %s; at most one status read per %s allows %d", calls, a.Status.BatchID, elapsed, pollPeriod, limit)
	}
	if calls < 3 {
		t.Errorf("only %d vendor calls: the batch was not polled while in flight", calls)
	}
}
