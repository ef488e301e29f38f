package decision

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// The status transitions every mode shares: a run refused before it
// starts, a run that starts, and a started run that ends. The reasons
// they record are listed, word for word, in docs/agent-controller.md
// ("Failure reasons"); each mode's file declares its own. Each records its
// Kubernetes Events (events.go).

// refuseInvalid fails a Pending run whose definition or settings cannot
// run: retrying would not change that, so it fails at once, saying why.
func refuseInvalid(s Snapshot, reason string) Plan {
	return fail(s, reason, FailureInvalidSpec, agentsv1alpha1.ReasonInvalidDefinition)
}

// refuseDisabled fails a Pending run that needs a component this
// controller runs without (batch, realtime) or cannot use (a realtime key).
func refuseDisabled(s Snapshot, reason string) Plan {
	return fail(s, reason, FailureInvalidSpec, agentsv1alpha1.ReasonExecutionDisabled)
}

// fail moves a Pending Agent straight to Failed: it never ran, so it is
// counted but not timed. condReason goes on the Resolved condition.
func fail(s Snapshot, reason string, kind FailureKind, condReason string) Plan {
	st := s.Agent.Status.DeepCopy()
	st.Phase = agentsv1alpha1.PhaseFailed
	st.FailureReason = reason
	st.ExitCode = ptr.To[int32](1)
	st.CompletedAt = &metav1.Time{Time: s.Now}
	st.ObservedGeneration = s.Agent.Generation
	setCondition(st, s, agentsv1alpha1.ConditionResolved, metav1.ConditionFalse, condReason, reason)
	return Plan{Status: st, Prune: true, Events: []Event{refusedEvent(reason)},
		Outcome: Outcome{Terminal: agentsv1alpha1.PhaseFailed, ExitCode: 1, Failure: kind}}
}

// start moves plan's Pending run to Running as of this pass, with st (the
// caller's copy of the status, carrying its mode's fields) resolved and
// Started for reason, and times the wait since the Agent's creation. Its
// one Event names what carries the run (msg, the related object).
func start(plan *Plan, s Snapshot, st *agentsv1alpha1.AgentStatus, reason, msg string, related *corev1.ObjectReference) {
	st.Phase = agentsv1alpha1.PhaseRunning
	st.StartedAt = &metav1.Time{Time: s.Now}
	st.ObservedGeneration = s.Agent.Generation
	setCondition(st, s, agentsv1alpha1.ConditionResolved, metav1.ConditionTrue, agentsv1alpha1.ReasonResolved, "Station and AgentDefinition found")
	setCondition(st, s, agentsv1alpha1.ConditionStarted, metav1.ConditionTrue, reason, msg)
	plan.Status = st
	plan.Events = append(plan.Events, startedEvent(s, msg, related))
	plan.Outcome.Started = true
	plan.Outcome.QueueWait = s.Now.Sub(s.Agent.CreationTimestamp.Time)
	plan.Outcome.Mode = modeOf(s)
}

// finish ends a started run in phase, writing onto st (which keeps what
// the caller set: the jobName, a restore condition). The run is timed from
// its startedAt, its pod's delivery summary (if read) is counted with its
// end, and its end asks for history pruning.
func finish(s Snapshot, st *agentsv1alpha1.AgentStatus, phase agentsv1alpha1.AgentPhase, exit int32, output, reason string, kind FailureKind) Plan {
	st.Phase = phase
	st.ExitCode = ptr.To(exit)
	st.Output = output
	st.FailureReason = reason
	st.CompletedAt = &metav1.Time{Time: s.Now}
	st.ObservedGeneration = s.Agent.Generation
	var d time.Duration
	if st.StartedAt != nil {
		d = s.Now.Sub(st.StartedAt.Time)
	}
	return Plan{Status: st, Prune: true, Events: []Event{finishedEvent(phase, d, exit, reason)},
		Outcome: Outcome{Terminal: phase, ExitCode: exit, Duration: d, Failure: kind, Summary: s.Pod.Summary}}
}

// setCondition sets a condition on st as of this pass: the snapshot's
// clock and the Agent's generation.
func setCondition(st *agentsv1alpha1.AgentStatus, s Snapshot, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: s.Agent.Generation, LastTransitionTime: metav1.Time{Time: s.Now},
	})
}
