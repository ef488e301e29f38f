package sandboxclass

import (
	"context"
	"fmt"
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
	if ok, err := kubeutil.Live(ctx, r.Client, req.NamespacedName, c); !ok {
		return reconcile.Result{}, err
	}
	s := Snapshot{Class: c, Connections: map[string]bool{}, Now: kubeutil.PassTime(r.Now)}
	if n := runtimeClass(c); n != "" {
		rc := &nodev1.RuntimeClass{}
		found, err := kubeutil.Get(ctx, r.Client, types.NamespacedName{Name: n}, rc)
		if err != nil {
			return reconcile.Result{}, err
		}
		if found {
			s.RuntimeClass = rc
		}
	}
	for _, ref := range c.Spec.AllowedConnections {
		found, err := kubeutil.Get(ctx, r.Client, types.NamespacedName{Namespace: c.Namespace, Name: ref.Name}, &omniav1.Connection{})
		if err != nil {
			return reconcile.Result{}, err
		}
		s.Connections[ref.Name] = found
	}
	d := Decide(s)
	kubeutil.Emit(r.Recorder, c, "Check", d.Events)
	if d.Changed {
		c.Status = d.Status
		// A 409 is returned, not dropped: the SandboxClass watch passes spec
		// changes only, so no later event would bring the pass back.
		if err := r.Client.Status().Update(ctx, c); err != nil {
			return reconcile.Result{}, fmt.Errorf("write status of SandboxClass %s: %w", req, err)
		}
	}
	return reconcile.Result{}, d.Retry
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
