package kubeutil

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Controller is the part of a controller's wiring every SetupWithManager
// of this module shares; each adds its own watches to what Builder
// returns and ends with Complete.
type Controller struct {
	// Name names the controller in logs, metrics and events.
	Name string
	// For is the kind the controller reconciles.
	For client.Object
	// SpecOnly passes only changes of For's spec (a new generation): the
	// controller's own status writes would otherwise enqueue the object
	// again, in a loop.
	SpecOnly bool
	// Workers is how many objects reconcile at once; 0 leaves
	// controller-runtime's default of one.
	Workers int
}

// Builder starts the controller on mgr, ready for its watches.
func (c Controller) Builder(mgr ctrl.Manager) *builder.Builder {
	var opts []builder.ForOption
	if c.SpecOnly {
		opts = append(opts, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	b := ctrl.NewControllerManagedBy(mgr).Named(c.Name).For(c.For, opts...)
	if c.Workers > 0 {
		b = b.WithOptions(controller.Options{MaxConcurrentReconciles: c.Workers})
	}
	return b
}

// Complete finishes the wiring: passes go to rec, or to r when rec is nil
// (tests hand in a wrapper of r that counts or holds passes).
func Complete(b *builder.Builder, r, rec reconcile.Reconciler) error {
	if rec == nil {
		rec = r
	}
	return b.Complete(rec)
}

// EnqueueOldAndNew is a watch's event handler that enqueues the requests
// mapTo maps an object to: on an update, those of the new object and of
// the old one too, so that what an edit moved the object away from is
// passed as well — a map function (handler.EnqueueRequestsFromMapFunc)
// sees only the new object. moved, when not nil, tells whether an update
// from before to after moved it; nil maps the old object on every update.
func EnqueueOldAndNew(mapTo handler.MapFunc, moved func(before, after client.Object) bool) handler.Funcs {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
		for _, req := range mapTo(ctx, o) {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.ObjectNew)
			if moved == nil || moved(e.ObjectOld, e.ObjectNew) {
				add(ctx, q, e.ObjectOld)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
	}
}

// EnqueueByIndex is ByIndex as a watch's event handler.
func EnqueueByIndex(c client.Client, newList func() client.ObjectList, field string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(ByIndex(c, newList, field))
}
