package agentruntime

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// idlePlan is what the idle deadline decided for this pass.
type idlePlan struct {
	// Deleted: the pass ends with idleAction delete's delete of the
	// AgentRuntime.
	Deleted bool
	// ScaleToZero: hold the stable Deployment at zero replicas.
	ScaleToZero bool
	// RequeueAfter is the time left to the deadline, at least
	// minIdleRequeue (0: no timer).
	RequeueAfter time.Duration
}

// minIdleRequeue is the shortest idle timer. The deadline counts from
// times stored with second precision and a pass reads a clock truncated to
// the second, so a shorter timer (a sub-second idleTimeout, or the last
// fraction of a second before the deadline) brings the pass back within
// the same second to find the deadline not passed yet, again and again
// until the second ends; and an idleTimeout of 0 would arm no timer at
// all for a woken agent.
const minIdleRequeue = time.Second

// idleCondition is the Idle condition a decision asks for.
type idleCondition struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// idleDecision is the outcome of the idle rules for one pass.
type idleDecision struct {
	Plan idlePlan
	// Delete asks for idleAction delete to be carried out.
	Delete bool
	// Reaped: the deadline passed in this pass; IdleReaped is emitted.
	Reaped bool
	// Cond is the Idle condition to write; nil leaves it as it is.
	Cond *idleCondition
	// Remove drops the Idle condition: the agent is not reapable.
	Remove bool
}

// The wake mark records which value of the wake annotation a reaped agent
// has already seen. It lives in the message of the Idle=True condition
// because that condition is written in the same status update that
// records the reaping: the two cannot disagree, the decision stays a
// function of the agent alone, and nothing the rollout engine writes (the
// Deployment) has to carry idle bookkeeping. A digest keeps the message
// short whatever the annotation holds. Should the message be lost or
// edited, the marks differ and the agent wakes, the safe direction.
const wakeMarkPrefix = "(wake mark "

// wakeMark is a short digest of the wake annotation, "none" when unset.
func wakeMark(ann map[string]string) string {
	v, ok := ann[omniav1.AnnotationWakeRequestedAt]
	if !ok {
		return "none"
	}
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:6])
}

// markIn reads the wake mark back from an Idle=True message.
func markIn(msg string) string {
	i := strings.LastIndex(msg, wakeMarkPrefix)
	if i < 0 {
		return ""
	}
	rest := msg[i+len(wakeMarkPrefix):]
	j := strings.IndexByte(rest, ')')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// decideIdle applies the idle rules to one agent: its generation and
// annotations, spec, status (conditions and the runtime's session
// report) and the time. It does no I/O.
//
// The deadline is spec.idleTimeout after the latest of the last session
// activity, the time the agent last became Running (Ready=True) and the
// last wake (Idle=False/WakeRequested). It runs only while no session is
// open. A reaped agent (Idle=True) has no timer: only a spec change or a
// change of the wake annotation wakes it, and both are watch events.
func decideIdle(gen int64, ann map[string]string, spec *omniav1.AgentRuntimeSpec, st *omniav1.AgentRuntimeStatus, now time.Time) idleDecision {
	if spec.IdleTimeout == nil {
		return idleDecision{Remove: true}
	}
	timeout := spec.IdleTimeout.Duration
	cur := meta.FindStatusCondition(st.Conditions, omniav1.ConditionIdle)
	mark := wakeMark(ann)

	var wake string
	if cur != nil && cur.Status == metav1.ConditionTrue {
		switch {
		case gen > cur.ObservedGeneration:
			wake = "the spec changed"
		case markIn(cur.Message) != mark:
			wake = "the " + omniav1.AnnotationWakeRequestedAt + " annotation changed"
		default:
			return idleDecision{Plan: idlePlan{ScaleToZero: true}}
		}
	}
	if wake != "" {
		// The deadline restarts now; the new condition's transition time
		// records the wake for the passes that follow.
		return idleDecision{
			Plan: idlePlan{RequeueAfter: max(timeout, minIdleRequeue)},
			Cond: &idleCondition{metav1.ConditionFalse, omniav1.ReasonWakeRequested, "woken because " + wake + "; configured replicas restored"},
		}
	}

	if n := sessions(st); n > 0 {
		return idleDecision{Cond: &idleCondition{metav1.ConditionFalse, omniav1.ReasonActive, fmt.Sprintf("%d session(s) open", n)}}
	}
	var lastActivity, readySince, wokeAt time.Time
	if st.LastActivityTime != nil {
		lastActivity = st.LastActivityTime.Time
	}
	if c := meta.FindStatusCondition(st.Conditions, omniav1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
		readySince = c.LastTransitionTime.Time
	}
	wokeRecently := cur != nil && cur.Status == metav1.ConditionFalse && cur.Reason == omniav1.ReasonWakeRequested
	if wokeRecently {
		wokeAt = cur.LastTransitionTime.Time
	}
	base := latestTime(lastActivity, readySince, wokeAt)
	if base.IsZero() {
		return idleDecision{Cond: &idleCondition{metav1.ConditionFalse, omniav1.ReasonActive, "no session open; the idle deadline starts once the agent is Running"}}
	}
	deadline := base.Add(timeout)
	if left := deadline.Sub(now); left > 0 {
		d := idleDecision{Plan: idlePlan{RequeueAfter: max(left, minIdleRequeue)}}
		if !wokeRecently || lastActivity.After(wokeAt) {
			// WakeRequested stays until activity after the wake supersedes it.
			d.Cond = &idleCondition{metav1.ConditionFalse, omniav1.ReasonActive,
				"no session open; idle at " + deadline.UTC().Format(time.RFC3339)}
		}
		return d
	}
	if spec.EffectiveIdleAction() == omniav1.IdleDelete {
		return idleDecision{Delete: true, Reaped: true}
	}
	return idleDecision{
		Plan:   idlePlan{ScaleToZero: true},
		Reaped: true,
		Cond: &idleCondition{metav1.ConditionTrue, omniav1.ReasonIdleTimeoutExceeded,
			fmt.Sprintf("no session for %s; scaled to zero until the spec or the %s annotation changes %s%s)",
				timeout, omniav1.AnnotationWakeRequestedAt, wakeMarkPrefix, mark)},
	}
}

// sessions is status.activeSessions, 0 when unset.
func sessions(st *omniav1.AgentRuntimeStatus) int32 {
	if st.ActiveSessions == nil {
		return 0
	}
	return *st.ActiveSessions
}

func latestTime(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}

// idleDeadline applies decideIdle: it records the Idle condition, plans
// the delete for idleAction delete (only of the very object the decision
// was made on) and IdleReaped when the deadline passes.
func (d *decider) idleDeadline() idlePlan {
	a := d.s.in.Agent
	id := decideIdle(a.Generation, a.Annotations, &a.Spec, d.st, d.t.Time)
	switch {
	case id.Remove:
		meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionIdle)
	case id.Cond != nil:
		d.set(omniav1.ConditionIdle, id.Cond.Status, id.Cond.Reason, id.Cond.Message)
	}
	if id.Delete {
		// The resourceVersion precondition refuses the delete if the agent
		// changed since it was read (a session opened, a wake was asked
		// for); the conflict is retried with a fresh read. No status is
		// written: the agent is going.
		uid, rv := a.UID, a.ResourceVersion
		err := d.do(write{op: opDelete, obj: a.DeepCopy(), preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}).err
		switch {
		case apierrors.IsNotFound(err):
			d.end(nil, 0, nil, nil)
		case err != nil:
			d.end(nil, 0, fmt.Errorf("delete idle AgentRuntime %s/%s: %w", a.Namespace, a.Name, err), nil)
		default:
			d.emit("Reap", corev1.EventTypeNormal, omniav1.EventIdleReaped, fmt.Sprintf("no session for %s; AgentRuntime deleted", a.Spec.IdleTimeout.Duration))
			d.end(nil, 0, nil, nil)
		}
		return idlePlan{Deleted: true}
	}
	if id.Reaped {
		d.emit("Reap", corev1.EventTypeNormal, omniav1.EventIdleReaped, fmt.Sprintf("no session for %s; scaled to zero", a.Spec.IdleTimeout.Duration))
	}
	return id.Plan
}

// holdAtZero overrides the phase of an agent the idle deadline holds at
// zero replicas: Pending, as the phase documents, even while its last
// pods are still terminating.
func holdAtZero(a *omniav1.AgentRuntime, st *omniav1.AgentRuntimeStatus, t metav1.Time) {
	st.Phase = omniav1.AgentRuntimePhasePending
	kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionReady, metav1.ConditionFalse, omniav1.ReasonRuntimeNotReady, "scaled to zero by the idle deadline")
}
