package kubeutil

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Outcome is the decision of a controller whose only write is its
// object's status: what one pass writes, emits and returns. The
// controller's pure Decide computes it; ReconcileStatus acts on it.
type Outcome[S any] struct {
	// Status is the complete desired status.
	Status S
	// Changed reports whether Status differs from the stored status; only
	// then is it written.
	Changed bool
	// Events are the events to emit, one per transition, not one per pass.
	Events []Event
	// Retry, when set, is returned from Reconcile, so controller-runtime
	// retries with backoff: an object the spec references is missing. A
	// spec problem is no retry: only an edit fixes it, and the watch on
	// the kind brings the edit.
	Retry error
}

// Decided is the Outcome that makes st the status of an object whose
// stored status is old: it is written only when the two differ.
func Decided[S any](old, st S, evs []Event, retry error) Outcome[S] {
	return Outcome[S]{Status: st, Changed: !equality.Semantic.DeepEqual(old, st), Events: evs, Retry: retry}
}

// StatusWriter is how a status-only controller writes: through Client,
// with its events on Recorder (none when nil) under Action, the
// events.k8s.io verb ("Check", "Compile").
type StatusWriter struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// Recorder emits the decision's events; none are emitted when nil.
	Recorder events.EventRecorder
	// Action is the events' action field.
	Action string
}

// ReconcileStatus is one pass of a status-only controller, the skeleton
// they share: it reads the object of req into obj (nothing is done when
// it is gone or being deleted), lets decide read what else the decision
// needs and decide, emits the decision's events, stores its status in
// *status — which points into obj — and writes it when it changed, and
// returns the decision's Retry. A 409 on the write is returned, not
// dropped: these controllers watch their kind for spec changes only, so
// no later event would bring the pass back.
func ReconcileStatus[S any](ctx context.Context, w StatusWriter, req reconcile.Request, obj client.Object, status *S,
	decide func(context.Context) (Outcome[S], error)) (reconcile.Result, error) {
	if ok, err := Live(ctx, w.Client, req.NamespacedName, obj); !ok {
		return reconcile.Result{}, err
	}
	d, err := decide(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	Emit(w.Recorder, obj, w.Action, d.Events)
	if d.Changed {
		*status = d.Status
		if err := w.Client.Status().Update(ctx, obj); err != nil {
			return reconcile.Result{}, fmt.Errorf("write status of %s %s: %w", kind(obj), req, err)
		}
	}
	return reconcile.Result{}, d.Retry
}
