package decision

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

func TestConcurrency(t *testing.T) {
	running := func(name string, startedSecondsAgo int) *agentsv1alpha1.Agent {
		a := agent(name, agentsv1alpha1.PhaseRunning)
		a.Status.StartedAt = &metav1.Time{Time: t0.Add(-time.Duration(startedSecondsAgo) * time.Second)}
		a.ResourceVersion = "rv-" + name
		return a
	}
	pending := func(name string) *agentsv1alpha1.Agent {
		a := agent(name, agentsv1alpha1.PhasePending)
		a.ResourceVersion = "rv-" + name
		return a
	}
	cases := []struct {
		rule        string
		policy      agentsv1alpha1.ConcurrencyPolicy
		max         int32
		runs        []*agentsv1alpha1.Agent
		inFlight    int
		wantStart   bool
		wantPreempt []string
		// withJob names the Pending runs whose Job exists already ("new"
		// is the run decided on).
		withJob []string
	}{
		{"Allow with maxConcurrentRuns 0 is unlimited", agentsv1alpha1.AllowConcurrent, 0, []*agentsv1alpha1.Agent{running("r1", 5), running("r2", 5)}, 0, true, nil, nil},
		{"Allow queues in Pending at maxConcurrentRuns", agentsv1alpha1.AllowConcurrent, 2, []*agentsv1alpha1.Agent{running("r1", 5), running("r2", 5)}, 0, false, nil, nil},
		{"Allow admits below maxConcurrentRuns", agentsv1alpha1.AllowConcurrent, 3, []*agentsv1alpha1.Agent{running("r1", 5), running("r2", 5)}, 0, true, nil, nil},
		{"Pending runs without a Job and finished runs do not count", agentsv1alpha1.AllowConcurrent, 1, []*agentsv1alpha1.Agent{agent("p", agentsv1alpha1.PhasePending), agent("s", agentsv1alpha1.PhaseSucceeded)}, 0, true, nil, nil},
		{"admissions not yet in the cache count, so a burst never over-admits", agentsv1alpha1.AllowConcurrent, 2, []*agentsv1alpha1.Agent{running("r1", 5)}, 1, false, nil, nil},
		{"Forbid allows one run whatever maxConcurrentRuns says", agentsv1alpha1.ForbidConcurrent, 5, []*agentsv1alpha1.Agent{running("r1", 5)}, 0, false, nil, nil},
		{"Replace deletes the oldest Running run and starts", agentsv1alpha1.ReplaceConcurrent, 0, []*agentsv1alpha1.Agent{running("young", 5), running("old", 50)}, 0, true, []string{"old", "young"}, nil},
		{"Replace with a free slot deletes nothing", agentsv1alpha1.ReplaceConcurrent, 0, nil, 0, true, nil, nil},
		{"Replace waits when only unseen admissions hold the slot", agentsv1alpha1.ReplaceConcurrent, 0, nil, 1, false, nil, nil},
		{"a Job created before a lost Running patch holds its slot", agentsv1alpha1.AllowConcurrent, 1, []*agentsv1alpha1.Agent{pending("lost-patch")}, 0, false, nil, []string{"lost-patch"}},
		{"a Pending run holding its slot through its Job counts with the Running ones", agentsv1alpha1.AllowConcurrent, 2, []*agentsv1alpha1.Agent{running("r1", 5), pending("lost-patch")}, 0, false, nil, []string{"lost-patch"}},
		{"Replace preempts a Pending run holding its slot through its Job", agentsv1alpha1.ReplaceConcurrent, 0, []*agentsv1alpha1.Agent{pending("lost-patch")}, 0, true, []string{"lost-patch"}, []string{"lost-patch"}},
		{"a run whose own Job exists already goes Running without waiting for a slot", agentsv1alpha1.ForbidConcurrent, 0, []*agentsv1alpha1.Agent{running("r1", 5)}, 0, true, nil, []string{"new"}},
		{"a run whose own Job exists already preempts nothing under Replace", agentsv1alpha1.ReplaceConcurrent, 0, []*agentsv1alpha1.Agent{running("r1", 5)}, 0, true, nil, []string{"new"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			s := snap(agent("new", ""))
			s.Station = station(c.policy, c.max)
			s.StationRuns = append(slices.Clone(c.runs), s.Agent)
			s.InFlight = c.inFlight
			for _, name := range c.withJob {
				if s.PendingWithJob == nil {
					s.PendingWithJob = map[string]bool{}
				}
				s.PendingWithJob[name] = true
			}
			p := Decide(s)
			if (p.CreateJob != nil) != c.wantStart {
				t.Fatalf("started %v, want %v (%+v)", p.CreateJob != nil, c.wantStart, p)
			}
			if !c.wantStart && (p.Status == nil || p.Status.Phase != agentsv1alpha1.PhasePending || !p.Outcome.Queued) {
				t.Errorf("a queued run stays Pending with a Queued condition: %+v", p.Status)
			}
			var got []string
			for _, v := range p.Preempt {
				got = append(got, v.Name)
				if v.ResourceVersion != "rv-"+v.Name {
					t.Errorf("victim %s carries no resourceVersion precondition", v.Name)
				}
			}
			if strings.Join(got, ",") != strings.Join(c.wantPreempt, ",") {
				t.Errorf("preempted %v, want %v", got, c.wantPreempt)
			}
		})
	}
}

func TestAQueuedRunIsNotRewrittenEachReconcile(t *testing.T) {
	s := snap(agent("new", ""))
	s.Station = station(agentsv1alpha1.ForbidConcurrent, 0)
	s.StationRuns = []*agentsv1alpha1.Agent{agent("r", agentsv1alpha1.PhaseRunning)}
	first := Decide(s)
	s.Agent.Status = *first.Status
	if again := Decide(s); again.Status != nil {
		t.Fatalf("second reconcile of a queued run wrote %+v", again.Status)
	}
}
