package kubeutil

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentplane/agentplane/libs/truncate"
)

// Judgement is the bookkeeping the controllers' deciders share: it sets
// the conditions of one object's status, each stamped with the object's
// generation and the pass's time, and collects a Warning event per
// transition it is told of. A decider embeds it, so its own code is only
// the judging.
type Judgement struct {
	// Conditions are the status conditions being judged.
	Conditions *[]metav1.Condition
	// Generation is the object's metadata.generation, each condition's
	// observedGeneration.
	Generation int64
	// Now is a flipped condition's lastTransitionTime.
	Now metav1.Time
	// MaxMessage caps an event's message, in bytes; 0 leaves it whole.
	MaxMessage int
	// Events are the Warning events collected so far, for the Decision.
	Events []Event
}

// Set is SetCondition on the judged conditions: it reports whether the
// status, reason or message changed.
func (j *Judgement) Set(typ string, status metav1.ConditionStatus, reason, msg string) bool {
	return SetCondition(j.Conditions, j.Generation, j.Now, typ, status, reason, msg)
}

// WarnOn adds a Warning event when changed, Set's report: an event marks a
// transition once, not every pass that finds the same fault.
func (j *Judgement) WarnOn(changed bool, reason, msg string) {
	if !changed {
		return
	}
	if j.MaxMessage > 0 {
		msg = truncate.String(msg, j.MaxMessage)
	}
	j.Events = append(j.Events, Event{Type: corev1.EventTypeWarning, Reason: reason, Message: msg})
}
