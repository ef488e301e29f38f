// Package scheduledfunction is the ScheduledFunction controller: it calls
// a function-mode AgentRuntime on a cron schedule, with a fixed input, and
// records each run's outcome (never the answer's body). Decide is pure:
// from the object, its agent and the time it computes the status, the run
// due now if any, and when to look again. Reconciler makes the call
// through an Invoker and writes the status around it, the run recorded as
// Running before the call so that no run is made twice.
package scheduledfunction

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Snapshot is everything one decision reads.
type Snapshot struct {
	// Function is the object being reconciled.
	Function *omniav1.ScheduledFunction
	// Agent is the AgentRuntime of spec.agentRuntimeRef; nil when missing.
	Agent *omniav1.AgentRuntime
	// Now is the pass's time, truncated to the second.
	Now time.Time
}

// Decision is what the reconciler writes, calls and returns.
type Decision struct {
	// Status is the complete desired status; a due run is in it as Running.
	Status omniav1.ScheduledFunctionStatus
	// Changed reports whether Status differs from the stored status.
	Changed bool
	// Fire is the scheduled time to run now; nil when none is due.
	Fire *time.Time
	// RequeueAfter is the wait until the next scheduled time: a timer, as
	// the answer changes with time and no Kubernetes event brings it.
	RequeueAfter time.Duration
	// Events are Warning events, one per transition into a fault.
	Events []kubeutil.Event
	// Retry is returned from Reconcile: the AgentRuntime is missing, and a
	// reference to a missing object is retried with backoff.
	Retry error
}

// Decide computes a ScheduledFunction's status and the run due now.
func Decide(s Snapshot) Decision {
	f := s.Function
	st := f.Status.DeepCopy()
	st.ObservedGeneration = f.Generation
	now := metav1.NewTime(s.Now)
	j := kubeutil.Judgement{Conditions: &st.Conditions, Generation: f.Generation, Now: now}
	d := Decision{}
	notReady := func(reason, msg string) {
		st.NextScheduleTime = nil
		j.WarnOn(j.Set(omniav1.ConditionReady, metav1.ConditionFalse, reason, msg), reason, msg)
	}
	interrupted(st, now)

	sched, reason, err := Parse(f.Spec)
	if err != nil {
		j.Set(omniav1.ConditionScheduleValid, metav1.ConditionFalse, reason, err.Error())
		notReady(reason, err.Error())
		return d.with(f, st, j)
	}
	j.Set(omniav1.ConditionScheduleValid, metav1.ConditionTrue, omniav1.ReasonScheduleParsed, "schedule "+f.Spec.Schedule+" in "+zone(f.Spec))

	ref := f.Spec.AgentRuntimeRef.Name
	switch {
	case s.Agent == nil:
		msg := fmt.Sprintf("AgentRuntime %q not found", ref)
		j.Set(omniav1.ConditionAgentResolved, metav1.ConditionFalse, omniav1.ReasonAgentNotFound, msg)
		notReady(omniav1.ReasonAgentNotFound, msg)
		d.Retry = fmt.Errorf("ScheduledFunction %s/%s: %s", f.Namespace, f.Name, msg)
		return d.with(f, st, j)
	case s.Agent.Spec.Mode != omniav1.AgentModeFunction:
		msg := fmt.Sprintf("AgentRuntime %q is in mode %q; a ScheduledFunction calls mode function", ref, mode(s.Agent))
		j.Set(omniav1.ConditionAgentResolved, metav1.ConditionFalse, omniav1.ReasonAgentNotFunction, msg)
		notReady(omniav1.ReasonAgentNotFunction, msg)
		return d.with(f, st, j)
	}
	j.Set(omniav1.ConditionAgentResolved, metav1.ConditionTrue, omniav1.ReasonAgentFound, fmt.Sprintf("AgentRuntime %q, mode function", ref))

	if f.Spec.Suspend {
		st.NextScheduleTime = nil
		j.Set(omniav1.ConditionReady, metav1.ConditionFalse, omniav1.ReasonSuspended, "spec.suspend is true: no runs")
		return d.with(f, st, j)
	}

	base := f.CreationTimestamp.Time
	if st.LastScheduleTime != nil {
		base = st.LastScheduleTime.Time
	}
	if count, latest := sched.Due(base, s.Now); count > 0 {
		at := metav1.NewTime(latest)
		st.LastScheduleTime = &at
		if dl := f.Spec.StartingDeadlineSeconds; dl != nil && s.Now.Sub(latest) > time.Duration(*dl)*time.Second {
			st.MissedRuns += count
			push(st, omniav1.RunRecord{ScheduleTime: at, Outcome: omniav1.RunMissed, Reason: "StartingDeadlineExceeded",
				Message: fmt.Sprintf("%d scheduled times skipped, the latest %s late, past the starting deadline of %ds", count, s.Now.Sub(latest), *dl)}, limit(f))
		} else {
			st.MissedRuns += count - 1
			push(st, omniav1.RunRecord{ScheduleTime: at, Outcome: omniav1.RunRunning}, limit(f))
			d.Fire = &latest
		}
	}
	next := sched.Next(maxTime(base, s.Now))
	nt := metav1.NewTime(next)
	st.NextScheduleTime = &nt
	d.RequeueAfter = next.Sub(s.Now)
	j.Set(omniav1.ConditionReady, metav1.ConditionTrue, omniav1.ReasonScheduled, "runs on schedule "+f.Spec.Schedule+" in "+zone(f.Spec))
	return d.with(f, st, j)
}

// with completes d with the status and the collected events.
func (d Decision) with(f *omniav1.ScheduledFunction, st *omniav1.ScheduledFunctionStatus, j kubeutil.Judgement) Decision {
	d.Status = *st
	d.Changed = !equality.Semantic.DeepEqual(f.Status, *st)
	d.Events = j.Events
	return d
}

// interrupted ends a run a pass finds still Running: the pass that made it
// records its outcome before it ends, so the controller stopped during the
// call (or could not write the outcome). The run is not repeated.
func interrupted(st *omniav1.ScheduledFunctionStatus, now metav1.Time) {
	if st.LastResult == nil || st.LastResult.Outcome != omniav1.RunRunning {
		return
	}
	end := func(r *omniav1.RunRecord) {
		r.Outcome, r.Reason, r.FinishTime = omniav1.RunFailed, "Interrupted", &now
		r.Message = "the controller stopped before the call's outcome was recorded; the run is not repeated"
	}
	end(st.LastResult)
	if len(st.History) > 0 && st.History[0].Outcome == omniav1.RunRunning {
		end(&st.History[0])
	}
}

// push records rec as the latest run, in lastResult and at the head of the
// history, which keeps at most limit runs.
func push(st *omniav1.ScheduledFunctionStatus, rec omniav1.RunRecord, limit int) {
	r := rec
	st.LastResult = &r
	st.History = append([]omniav1.RunRecord{rec}, st.History...)
	st.History = st.History[:min(len(st.History), limit)]
	if len(st.History) == 0 {
		st.History = nil
	}
}

// Finish records the outcome of the run for scheduled time at, which a
// Decision's status holds as Running; false when it holds no such run
// (another pass has recorded it).
func Finish(st *omniav1.ScheduledFunctionStatus, at time.Time, out omniav1.RunRecord) bool {
	if st.LastResult == nil || st.LastResult.Outcome != omniav1.RunRunning || !st.LastResult.ScheduleTime.Time.Equal(at) {
		return false
	}
	out.ScheduleTime = st.LastResult.ScheduleTime
	st.LastResult = &out
	if len(st.History) > 0 && st.History[0].ScheduleTime.Time.Equal(at) {
		st.History[0] = out
	}
	return true
}

// DefaultHistoryLimit is spec.historyLimit's default, for an object stored
// without it.
const DefaultHistoryLimit = 5

func limit(f *omniav1.ScheduledFunction) int {
	if f.Spec.HistoryLimit == nil {
		return DefaultHistoryLimit
	}
	return int(*f.Spec.HistoryLimit)
}

func zone(spec omniav1.ScheduledFunctionSpec) string {
	if spec.TimeZone == "" {
		return "UTC"
	}
	return spec.TimeZone
}

func mode(a *omniav1.AgentRuntime) omniav1.AgentMode {
	if a.Spec.Mode == "" {
		return omniav1.AgentModeAgent
	}
	return a.Spec.Mode
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
