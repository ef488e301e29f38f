package decision

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// Admission to a Station's slots, shared by every mode: a Station runs at
// most maxConcurrentRuns at once (0 is unlimited; Forbid and Replace allow
// one). Beyond that, Allow and Forbid queue the new run in Pending, and
// Replace deletes the oldest runs holding a slot to make room for it.

// admit decides whether the Pending run s.Agent takes a slot now. When it
// must wait, ok is false and plan is the queueing write. Otherwise plan
// holds the runs preempted to make room, to which the caller adds the
// start. held is set for a run holding its slot already (its Job exists,
// the patch to Running was lost): it neither waits nor preempts.
func admit(s Snapshot, held bool) (plan Plan, ok bool) {
	limit := s.Station.Spec.EffectiveMaxConcurrent()
	running := runningOf(s)
	if held || limit <= 0 || len(running)+s.InFlight < limit {
		return Plan{}, true
	}
	if s.Station.Spec.ConcurrencyPolicy != agentsv1alpha1.ReplaceConcurrent || len(running) == 0 {
		return queue(s), false
	}
	// Replace: the oldest run holding a slot makes room for this one.
	sort.SliceStable(running, func(i, j int) bool { return startedBefore(running[i], running[j]) })
	over := len(running) + s.InFlight - limit + 1
	for i := 0; i < over && i < len(running); i++ {
		v := running[i]
		ev := newEvent(corev1.EventTypeNormal, EventPreempted, actionPreempt,
			fmt.Sprintf("deleted to make room for Agent %s: Station %s runs %d at once (concurrencyPolicy Replace)", s.Agent.Name, s.Station.Name, limit))
		ev.Related = AgentRef(s.Agent)
		plan.Preempt = append(plan.Preempt, Victim{Name: v.Name, UID: v.UID, ResourceVersion: v.ResourceVersion, Event: ev})
	}
	plan.Outcome.Preempted = len(plan.Preempt)
	if len(running)-len(plan.Preempt)+s.InFlight >= limit {
		// Only admissions not yet visible hold the slots; wait for them.
		return queue(s), false
	}
	return plan, true
}

// hasSlot reports whether the Station has a free slot for s.Agent, for a
// run that does not preempt (a batch run's fallback Job).
func hasSlot(s Snapshot) bool {
	limit := s.Station.Spec.EffectiveMaxConcurrent()
	return limit <= 0 || ActiveRuns(s) < limit
}

// ActiveRuns is how many runs hold a slot of the Station, as admission
// counts them against its limit: its runs that hold one (runningOf) and
// those admitted but not yet seen holding one (s.InFlight). s.Agent, when
// set, is left out; the poll leaves it nil to count every run
// (controller_station_active_runs).
func ActiveRuns(s Snapshot) int {
	return len(runningOf(s)) + s.InFlight
}

// queue keeps the run Pending with Started=False/Queued. A run already
// shown queued is not rewritten, so waiting costs no writes.
func queue(s Snapshot) Plan {
	c := meta.FindStatusCondition(s.Agent.Status.Conditions, agentsv1alpha1.ConditionStarted)
	if c != nil && c.Reason == agentsv1alpha1.ReasonQueued {
		return Plan{Outcome: Outcome{Queued: true}}
	}
	st := s.Agent.Status.DeepCopy()
	if st.Phase == "" {
		st.Phase = agentsv1alpha1.PhasePending
	}
	setCondition(st, s, agentsv1alpha1.ConditionResolved, metav1.ConditionTrue, agentsv1alpha1.ReasonResolved, "Station and AgentDefinition found")
	msg := fmt.Sprintf("waiting for a free slot of Station %s (concurrencyPolicy %s)", s.Station.Name, policyOf(s.Station))
	setCondition(st, s, agentsv1alpha1.ConditionStarted, metav1.ConditionFalse, agentsv1alpha1.ReasonQueued, msg)
	// Recorded with the write that shows the run queued, which a run
	// already shown queued does not repeat: once per run.
	return Plan{Status: st, Events: []Event{newEvent(corev1.EventTypeNormal, EventQueued, actionAdmit, msg)}, Outcome: Outcome{Queued: true}}
}

// policyOf is the Station's concurrency policy, Allow when unset.
func policyOf(st *agentsv1alpha1.Station) agentsv1alpha1.ConcurrencyPolicy {
	if st.Spec.ConcurrencyPolicy == "" {
		return agentsv1alpha1.AllowConcurrent
	}
	return st.Spec.ConcurrencyPolicy
}

// runningOf returns the Station's runs other than s.Agent (all of them
// when it is nil) that hold a slot: the Running ones, and the Pending ones
// whose Job exists (created before a lost patch to Running: the Job runs,
// so not counting it would admit one over the limit). Runs being deleted
// are on their way out and hold none.
func runningOf(s Snapshot) []*agentsv1alpha1.Agent {
	var out []*agentsv1alpha1.Agent
	for _, r := range s.StationRuns {
		if s.Agent != nil && r.Name == s.Agent.Name || r.DeletionTimestamp != nil {
			continue
		}
		switch r.Status.Phase {
		case agentsv1alpha1.PhaseRunning:
			out = append(out, r)
		case "", agentsv1alpha1.PhasePending:
			if s.PendingWithJob[r.Name] {
				out = append(out, r)
			}
		}
	}
	return out
}

// startedBefore orders runs by status.startedAt as times; a run without one
// sorts first (it is the oldest we can tell), then by name for stability.
func startedBefore(x, y *agentsv1alpha1.Agent) bool {
	xs, ys := x.Status.StartedAt, y.Status.StartedAt
	switch {
	case xs == nil && ys == nil:
		return x.Name < y.Name
	case xs == nil:
		return true
	case ys == nil:
		return false
	case !xs.Equal(ys):
		return xs.Before(ys)
	}
	return x.Name < y.Name
}

// WaitsForSlot reports whether a may be waiting for a slot of its Station:
// it has not finished, and it is not Running, or runs as a batch fallback
// whose Job is not created yet. A slot freeing up is worth a pass over
// such runs, and only over them.
func WaitsForSlot(a *agentsv1alpha1.Agent) bool {
	switch {
	case a.Status.Phase.IsTerminal():
		return false
	case a.Status.Phase != agentsv1alpha1.PhaseRunning:
		return true
	}
	return a.Status.BatchFallback && a.Status.JobName == ""
}
