package scheduledfunction

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "scheduledfunction"

// MaxConcurrentReconciles is the worker count, fixed at three (see
// docs/omnia-controllers.md, "Concurrency"). A run holds its worker for
// the call, at most spec.timeoutSeconds.
const MaxConcurrentReconciles = 3

// Reconciler reconciles ScheduledFunctions.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// Reader reads from the API server, for the status write after a run
	// when the cached object is behind; Client when nil.
	Reader client.Reader
	// Invoker makes the runs.
	Invoker Invoker
	// Recorder emits the fault events; none are emitted when nil.
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconcile computes the schedule, makes the run due now if any, and asks
// to be called again at the next scheduled time.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	f := &omniav1.ScheduledFunction{}
	if ok, err := kubeutil.Live(ctx, r.Client, req.NamespacedName, f); !ok {
		return reconcile.Result{}, err
	}
	agent := &omniav1.AgentRuntime{}
	found, err := kubeutil.Get(ctx, r.Client, types.NamespacedName{Namespace: f.Namespace, Name: f.Spec.AgentRuntimeRef.Name}, agent)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !found {
		agent = nil
	}
	d := Decide(Snapshot{Function: f, Agent: agent, Now: kubeutil.Clock(r.Now)().UTC().Truncate(time.Second)})
	kubeutil.Emit(r.Recorder, f, "Schedule", d.Events)
	if d.Changed {
		f.Status = d.Status
		// The run is recorded as Running before it is made: a pass that
		// read a stale object fails here on the resourceVersion and makes
		// no call, so no scheduled time is run twice.
		if err := r.Client.Status().Update(ctx, f); err != nil {
			return reconcile.Result{}, fmt.Errorf("write status of ScheduledFunction %s: %w", req, err)
		}
	}
	if d.Fire != nil {
		out := r.Invoker.Invoke(ctx, Call{Function: f, Agent: agent, ScheduleTime: *d.Fire})
		if err := r.record(ctx, f, *d.Fire, out); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: d.RequeueAfter}, d.Retry
}

// record writes a run's outcome, reading the object again from the API
// server on a conflict; a conflict must not lose the outcome, which a
// later pass would otherwise record as Interrupted.
func (r *Reconciler) record(ctx context.Context, f *omniav1.ScheduledFunction, at time.Time, out omniav1.RunRecord) error {
	reader := r.Reader
	if reader == nil {
		reader = r.Client
	}
	first := true
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if !first {
			if err := reader.Get(ctx, client.ObjectKeyFromObject(f), f); err != nil {
				return err
			}
		}
		first = false
		if !Finish(&f.Status, at, out) {
			return nil
		}
		return r.Client.Status().Update(ctx, f)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("record the run of ScheduledFunction %s/%s: %w", f.Namespace, f.Name, err)
	}
	return nil
}

// SetupWithManager wires the controller with three workers: its kind, for
// spec changes only (its status writes would enqueue it again), and
// AgentRuntimes created, deleted or with a new spec (mode), which reach the
// ScheduledFunctions of their namespace that name them. rec, when not nil,
// is called instead of r (tests count or hold passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	c := mgr.GetClient()
	naming := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list omniav1.ScheduledFunctionList
		if err := c.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			if list.Items[i].Spec.AgentRuntimeRef.Name == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return reqs
	})
	b := kubeutil.Controller{Name: ControllerName, For: &omniav1.ScheduledFunction{}, SpecOnly: true, Workers: MaxConcurrentReconciles}.Builder(mgr).
		Watches(&omniav1.AgentRuntime{}, naming, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	return kubeutil.Complete(b, r, rec)
}
