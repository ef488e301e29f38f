package sandboxclass

import (
	"context"
	"time"

	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "sandboxclass"

// Reconciler reconciles SandboxClasses.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// Recorder emits the fault events; none are emitted when nil.
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconcile checks one SandboxClass.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c := &omniav1.SandboxClass{}
	w := kubeutil.StatusWriter{Client: r.Client, Recorder: r.Recorder, Action: "Check"}
	return kubeutil.ReconcileStatus(ctx, w, req, c, &c.Status, func(ctx context.Context) (Decision, error) {
		s, err := r.snapshot(ctx, c)
		if err != nil {
			return Decision{}, err
		}
		return Decide(s), nil
	})
}

// snapshot reads what c references: its RuntimeClass and Connections.
func (r *Reconciler) snapshot(ctx context.Context, c *omniav1.SandboxClass) (Snapshot, error) {
	s := Snapshot{Class: c, Connections: map[string]bool{}, Now: kubeutil.PassTime(r.Now)}
	if n := runtimeClass(c); n != "" {
		var err error
		if s.RuntimeClass, err = kubeutil.Lookup[nodev1.RuntimeClass](ctx, r.Client, types.NamespacedName{Name: n}); err != nil {
			return s, err
		}
	}
	for _, ref := range c.Spec.AllowedConnections {
		found, err := kubeutil.Get(ctx, r.Client, types.NamespacedName{Namespace: c.Namespace, Name: ref.Name}, &omniav1.Connection{})
		if err != nil {
			return s, err
		}
		s.Connections[ref.Name] = found
	}
	return s, nil
}

// SetupWithManager wires the controller: SandboxClasses, for spec changes
// only (its own status writes would otherwise enqueue it again), and the
// RuntimeClasses and Connections they name. Only their creation and
// deletion count — the class judges that they exist — so updates, a
// Connection's status writes among them, are not passed. It runs
// controller-runtime's default of one worker. rec, when not nil, is called
// instead of r (tests count or hold passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	classes := func() client.ObjectList { return &omniav1.SandboxClassList{} }
	existence := builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})
	b := kubeutil.Controller{Name: ControllerName, For: &omniav1.SandboxClass{}, SpecOnly: true}.Builder(mgr).
		Watches(&nodev1.RuntimeClass{}, kubeutil.EnqueueByIndex(r.Client, classes, index.SandboxClassRuntimeClass), existence).
		Watches(&omniav1.Connection{}, kubeutil.EnqueueByIndex(r.Client, classes, index.SandboxClassConnection), existence)
	return kubeutil.Complete(b, r, rec)
}
