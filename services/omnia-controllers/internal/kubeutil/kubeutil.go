// Package kubeutil holds the few helpers every controller of this module
// shares: condition bookkeeping, the event value the pure decision code
// returns, status-write error classification, the reads of a pass, and
// the reconcile pass of the controllers whose only write is status
// (ReconcileStatus).
package kubeutil

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Event is a Kubernetes event a decision asks the reconciler to emit.
// Decision code returns events instead of emitting them so it stays pure.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type string
	// Reason is the UpperCamelCase event reason.
	Reason string
	// Message is the human-readable note; never a secret value.
	Message string
}

// Emit records every event on obj. action is the events.k8s.io "action"
// field, the controller's verb ("Validate", "Reconcile").
func Emit(rec events.EventRecorder, obj runtime.Object, action string, evs []Event) {
	if rec == nil {
		return
	}
	for _, e := range evs {
		rec.Eventf(obj, nil, e.Type, e.Reason, action, "%s", e.Message)
	}
}

// SetCondition sets one condition, stamping observedGeneration and, when
// the status flips, lastTransitionTime = now. It reports whether status,
// reason or message changed, which callers use to emit an event once per
// transition instead of once per reconcile.
func SetCondition(conds *[]metav1.Condition, gen int64, now metav1.Time, typ string, status metav1.ConditionStatus, reason, msg string) bool {
	old := meta.FindStatusCondition(*conds, typ)
	changed := old == nil || old.Status != status || old.Reason != reason || old.Message != msg
	meta.SetStatusCondition(conds, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            msg,
		ObservedGeneration: gen,
		LastTransitionTime: now,
	})
	return changed
}

// IgnoreConflict drops a 409 from a status write: another writer got there
// first (or the cache lagged a write of ours), and the watch event of that
// write brings a fresh reconcile, which recomputes from the newer object.
// Only for controllers whose watch on the object has no predicate that
// could filter that event.
func IgnoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}
