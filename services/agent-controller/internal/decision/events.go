package decision

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/truncate"
)

// Kubernetes Events tell a run's story to `kubectl describe agent`: each
// transition a plan makes names the Events it is worth, and the controller
// records them only once the write that makes the transition true has
// succeeded, so a pass that loses the race records nothing and the pass
// that wins records them once. The table in docs/agent-controller.md
// ("Kubernetes Events") lists every reason below.

// Event reasons.
const (
	// EventQueued is recorded when the run waits for a slot of its Station.
	EventQueued = agentsv1alpha1.ReasonQueued
	// EventWaitingForPreviousJob is recorded when the run waits for the Job
	// of a deleted Agent of the same name to be garbage-collected.
	EventWaitingForPreviousJob = agentsv1alpha1.ReasonWaitingForPreviousJob
	// EventJobCreated is recorded when a batch run's fallback Job was
	// created (a run's first Job is named by its Started Event).
	EventJobCreated = agentsv1alpha1.ReasonJobCreated
	// EventStarted is recorded when the run went Running, whatever carries
	// it: the note names the Job created or the batch submitted.
	EventStarted = "Started"
	// EventSessionStarted is recorded when a realtime session's Job was
	// created; the session takes prompts once its pod is up.
	EventSessionStarted = "SessionStarted"
	// EventSessionEnded is recorded when a realtime session's run ended.
	EventSessionEnded = "SessionEnded"
	// EventSucceeded is recorded when the run ended Succeeded.
	EventSucceeded = "Succeeded"
	// EventFailed is recorded when the run ended Failed, or was refused
	// before it started; the note is its failureReason.
	EventFailed = "Failed"
	// EventPreempted is recorded when the run was deleted to make room for
	// a newer one under concurrencyPolicy Replace.
	EventPreempted = "Preempted"
	// EventBatchTimeout is recorded when a batch run reached
	// batch.timeoutMinutes without a result.
	EventBatchTimeout = "BatchTimeout"
	// EventCleanupFailed is recorded when deleting a batch at its provider
	// failed and is retried with backoff.
	EventCleanupFailed = "CleanupFailed"
	// EventCleanupGivenUp is recorded when batch cleanup gave up and removed
	// its finalizer, leaving the batch at the provider.
	EventCleanupGivenUp = "CleanupGivenUp"
)

// Event actions: what the controller was doing, which events.k8s.io/v1
// requires beside the reason.
const (
	actionAdmit   = "Admit"
	actionCreate  = "CreateJob"
	actionStart   = "Start"
	actionFinish  = "Finish"
	actionPreempt = "Preempt"
	actionCleanup = "CleanupBatch"
)

// MaxEventNote is the events.k8s.io/v1 limit on an Event's note, in bytes.
const MaxEventNote = 1024

// Event is one Kubernetes Event to record about an Agent.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type   string
	Reason string
	Action string
	// Note is for people; at most MaxEventNote bytes of valid UTF-8. It
	// holds what the Agent's status already shows (condition messages,
	// the failure reason, names), never a Secret's or variable's value.
	Note string
	// Related is the other object the event is about (the Job created,
	// the Agent that preempted this one); nil when none.
	Related *corev1.ObjectReference
}

// newEvent builds an Event, its note cut to what the API accepts.
func newEvent(typ, reason, action, note string) Event {
	return Event{Type: typ, Reason: reason, Action: action, Note: truncate.String(strings.ToValidUTF8(note, ""), MaxEventNote)}
}

// AgentRef points an Event at the Agent a, leaving out its
// resourceVersion, so that repeats of one event about one Agent aggregate
// into a series whatever version the Agent is at.
func AgentRef(a *agentsv1alpha1.Agent) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: agentsv1alpha1.GroupVersion.String(), Kind: "Agent",
		Namespace: a.Namespace, Name: a.Name, UID: a.UID,
	}
}

// startedEvent is the one Event of a run going Running: msg names what
// carries the run (the Started condition's message: the Job created, the
// batch submitted), related points at it (the Job; nil for a batch), and
// the note adds how long the run waited since the Agent's creation. One
// Event per transition: every Event is an API write, and a burst of runs
// should cost the API server what it must, not twice that.
func startedEvent(s Snapshot, msg string, related *corev1.ObjectReference) Event {
	wait := s.Now.Sub(s.Agent.CreationTimestamp.Time).Round(time.Second)
	e := newEvent(corev1.EventTypeNormal, EventStarted, actionStart,
		fmt.Sprintf("%s; the run started %s after the Agent was created", msg, max(wait, 0)))
	e.Related = related
	return e
}

// finishedEvent is the Event of a started run ending in phase: Failed is a
// Warning with the failure reason as its note.
func finishedEvent(phase agentsv1alpha1.AgentPhase, d time.Duration, exit int32, reason string) Event {
	if phase == agentsv1alpha1.PhaseFailed {
		return newEvent(corev1.EventTypeWarning, EventFailed, actionFinish, reason)
	}
	note := fmt.Sprintf("the run succeeded in %s (exit code %d)", d.Round(time.Second), exit)
	if reason != "" {
		note += "; " + reason
	}
	return newEvent(corev1.EventTypeNormal, EventSucceeded, actionFinish, note)
}

// refusedEvent is the Event of a run refused before it started.
func refusedEvent(reason string) Event {
	return newEvent(corev1.EventTypeWarning, EventFailed, actionAdmit, reason)
}

// jobRef refers to the Job of a run.
func jobRef(namespace, name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: namespace, Name: name}
}

// CleanupEvent is the Event of a failed attempt to delete a's batch at its
// provider: a retry (CleanupFailed, repeated as a series while the
// attempts go on), or the last attempt (CleanupGivenUp). cause is the
// attempt's error.
func CleanupEvent(a *agentsv1alpha1.Agent, attempts int32, giveUp bool, cause string) Event {
	batch := fmt.Sprintf("batch %s at %s", a.Status.BatchID, a.Status.BatchProvider)
	if giveUp {
		return newEvent(corev1.EventTypeWarning, EventCleanupGivenUp, actionCleanup,
			fmt.Sprintf("gave up deleting %s after %d attempts and removed the finalizer; the batch is left at the provider: %s", batch, attempts, cause))
	}
	// The note does not count attempts: a series keeps its first note, and
	// status.batchCleanupAttempts has the count.
	return newEvent(corev1.EventTypeWarning, EventCleanupFailed, actionCleanup,
		fmt.Sprintf("deleting %s failed; retrying with backoff: %s", batch, cause))
}
