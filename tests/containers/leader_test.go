package containers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/testenv"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tests/internal/containers"
)

// TestLeaderKilledEvery30s is the leader-loss suite: two agent-controller
// replicas elect a leader on their Lease (the defaults: 15 s lease, 10 s
// renew deadline, 2 s retry) while Agents are created at a steady
// rate; every 30 s the leader's container is killed (SIGKILL) and started
// again, as the kubelet restarts a crashed pod, so it comes back as the
// standby. Every Agent must end Succeeded with exactly one Job, every
// takeover must take at most 20 s, and every run's events must be in the
// stream exactly once.
func TestLeaderKilledEvery30s(t *testing.T) {
	const poll = 15 * time.Second
	p := startPlatform(t, platformOptions{replicas: 2, poll: poll})
	ns := p.namespace(t, "leader")
	agents := size(60, 2000)
	kills := size(2, 10)
	const every = 30 * time.Second
	p.station(t, ns, "quick", 20, 50*time.Millisecond)

	first := p.waitLeader(t, "", 2*time.Minute)
	t.Logf("first leader: %s", first)
	// Each replica's Go runtime keeps its heap under 90 % of its
	// container's memory limit (service.LimitMemory), which it read from
	// its cgroup, so the collector works harder before the kernel kills it.
	for _, c := range p.controllers {
		if got, want := metricOnceServed(t, c, "go_gc_gomemlimit_bytes"), float64(controllerMemory)*0.9; got < want-4096 || got > want {
			t.Errorf("%s: go_gc_gomemlimit_bytes %.0f, want 90 %% of its container's %d bytes", c.Alias(), got, controllerMemory)
		}
	}

	// Agents are created across the kills, so some are created while no
	// replica leads.
	spread := time.Duration(kills) * every
	names := make([]string, agents)
	var createErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		start := time.Now()
		for i := range names {
			names[i] = fmt.Sprintf("run-%d", i)
			time.Sleep(time.Until(start.Add(spread * time.Duration(i) / time.Duration(agents))))
			if err := p.create(t.Context(), ns, "quick", names[i]); err != nil {
				createErr = err
				return
			}
		}
	})

	var takeovers []time.Duration
	leader := first
	for range kills {
		time.Sleep(every)
		c := p.controller(leader)
		killed := time.Now()
		c.Kill()
		next := p.waitLeader(t, leader, 2*time.Minute)
		took := time.Since(killed)
		takeovers = append(takeovers, took)
		t.Logf("%s killed; %s leads after %s", leader, next, took.Round(100*time.Millisecond))
		c.Restart()
		leader = next
	}
	wg.Wait()
	if createErr != nil {
		t.Fatalf("create the Agents: %v", createErr)
	}

	last := p.waitAll(t, ns, agents, 10*time.Minute, "terminal", func(_ *snapshot, a agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() })
	duplicates, failed := 0, 0
	for _, name := range names {
		a := last.agents[name]
		if a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
			failed++
			t.Errorf("Agent %s ended %s (%s), want Succeeded", name, a.Status.Phase, a.Status.FailureReason)
		}
		if k := len(last.jobs[name]); k != 1 {
			duplicates += max(k-1, 0)
			t.Errorf("Agent %s has %d Jobs, want 1", name, k)
		}
	}
	var maxTakeover time.Duration
	for _, d := range takeovers {
		maxTakeover = max(maxTakeover, d)
		if d > 20*time.Second {
			t.Errorf("a takeover took %s, more than 20 s", d.Round(100*time.Millisecond))
		}
	}
	// One read of the namespace's events, split by run: a consumer per run
	// would pass the stream's limit on consumers.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	all, err := events.ReadAll(ctx, p.js, events.Filter{Namespace: ns})
	if err != nil {
		t.Fatalf("read the events of %s: %v", ns, err)
	}
	byRun := map[string][]*eventsv1.RunEvent{}
	for _, ev := range all {
		byRun[ev.GetRun().GetAgent()] = append(byRun[ev.GetRun().GetAgent()], ev)
	}
	var stored int
	for _, name := range names {
		evs := byRun[name]
		checkExactlyOnce(t, name, evs)
		if len(evs) == 0 || lifecycleOf(evs[len(evs)-1]) != "agent/succeeded" {
			t.Errorf("%s's stream does not end with the run's success (%d events)", name, len(evs))
		}
		stored += len(evs)
	}
	testenv.BenchReport(t, fmt.Sprintf("leader killed every %s, %d times: %d Agents created over %s, %d failed, %d duplicate Jobs; takeovers %v, the longest %s (bound 20 s); %d events stored, each run's once",
		every, kills, agents, spread, failed, duplicates, roundAll(takeovers), maxTakeover.Round(100*time.Millisecond), stored))
}

// controller is the replica whose alias is name.
func (p *platform) controller(name string) *containers.Container {
	for _, c := range p.controllers {
		if c.Alias() == name {
			return c
		}
	}
	panic("no controller " + name)
}

// waitLeader waits until the agent-controller Lease names a holder other
// than not whose lease is current, and returns it.
func (p *platform) waitLeader(t *testing.T, not string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var l coordinationv1.Lease
		err := p.cl.Get(t.Context(), types.NamespacedName{Namespace: "default", Name: "agent-controller"}, &l)
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && *l.Spec.HolderIdentity != not {
			return *l.Spec.HolderIdentity
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica but %q took the Lease within %s (%v)", not, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// roundAll rounds durations to a tenth of a second, for the report.
func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Millisecond)
	}
	return out
}
