package sessionretention

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/agentselect"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "sessionretentionpolicy"

// MaxConcurrentReconciles is the worker count, fixed at three (see
// docs/omnia-controllers.md, "Concurrency").
const MaxConcurrentReconciles = agentselect.Workers

// Reconciler reconciles SessionRetentionPolicies.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// Recorder emits the spec-problem events; none are emitted when nil.
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconcile judges one policy against the namespace's policies and agents.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &omniav1.SessionRetentionPolicy{}
	if ok, err := kubeutil.Live(ctx, r.Client, req.NamespacedName, p); !ok {
		return reconcile.Result{}, err
	}
	var all omniav1.SessionRetentionPolicyList
	if err := r.Client.List(ctx, &all, client.InNamespace(p.Namespace)); err != nil {
		return reconcile.Result{}, fmt.Errorf("list SessionRetentionPolicies of %s: %w", p.Namespace, err)
	}
	var agents omniav1.AgentRuntimeList
	if err := r.Client.List(ctx, &agents, client.InNamespace(p.Namespace)); err != nil {
		return reconcile.Result{}, fmt.Errorf("list AgentRuntimes of %s: %w", p.Namespace, err)
	}
	d := Decide(Snapshot{Policy: p, All: all.Items, Agents: agents.Items, Now: kubeutil.PassTime(r.Now)})
	kubeutil.Emit(r.Recorder, p, "Check", d.Events)
	if d.Changed {
		p.Status = d.Status
		if err := r.Client.Status().Update(ctx, p); err != nil {
			return reconcile.Result{}, fmt.Errorf("write status of SessionRetentionPolicy %s: %w", req, err)
		}
	}
	return reconcile.Result{}, nil
}

// SetupWithManager wires the controller with three workers: policies, for
// spec changes only, and what agentselect.Watch adds (the namespace's other
// policies, its AgentRuntimes). rec, when not nil, is called instead of r
// (tests count or hold passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	b := kubeutil.Controller{Name: ControllerName, For: &omniav1.SessionRetentionPolicy{}, SpecOnly: true, Workers: MaxConcurrentReconciles}.Builder(mgr)
	b = agentselect.Watch(b, mgr.GetClient(), &omniav1.SessionRetentionPolicy{}, func() client.ObjectList { return &omniav1.SessionRetentionPolicyList{} })
	return kubeutil.Complete(b, r, rec)
}
