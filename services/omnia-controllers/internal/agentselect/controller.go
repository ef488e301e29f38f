package agentselect

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Reconciler reconciles the policies of kind K (stored type V, handled as
// P): each pass judges one policy against the namespace's policies of the
// kind and its AgentRuntimes, and writes the judgement to status.
type Reconciler[V any, P Object[V], K Kind[P]] struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// Recorder emits the spec-problem events; none are emitted when nil.
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconcile judges one policy against the namespace's policies and agents.
func (r *Reconciler[V, P, K]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var k K
	p := P(new(V))
	w := kubeutil.StatusWriter{Client: r.Client, Recorder: r.Recorder, Action: "Check"}
	return kubeutil.ReconcileStatus(ctx, w, req, p, k.Status(p), func(ctx context.Context) (Decision, error) {
		s := Snapshot[V]{Policy: p, Now: kubeutil.PassTime(r.Now)}
		all := k.NewList()
		if err := r.Client.List(ctx, all, client.InNamespace(p.GetNamespace())); err != nil {
			return Decision{}, fmt.Errorf("list %s of %s: %w", k.Plural(), p.GetNamespace(), err)
		}
		var agents omniav1.AgentRuntimeList
		if err := r.Client.List(ctx, &agents, client.InNamespace(p.GetNamespace())); err != nil {
			return Decision{}, fmt.Errorf("list AgentRuntimes of %s: %w", p.GetNamespace(), err)
		}
		items, err := meta.ExtractList(all)
		if err != nil {
			return Decision{}, fmt.Errorf("list %s of %s: %w", k.Plural(), p.GetNamespace(), err)
		}
		for _, o := range items {
			q, ok := o.(P)
			if !ok {
				return Decision{}, fmt.Errorf("list %s of %s: an item of type %T", k.Plural(), p.GetNamespace(), o)
			}
			s.All = append(s.All, *q)
		}
		s.Agents = agents.Items
		return Decide[V, P, K](s), nil
	})
}

// SetupWithManager wires the controller with three workers: policies, for
// spec changes only, and what Watch adds (the namespace's other policies,
// its AgentRuntimes). rec, when not nil, is called instead of r (tests
// count or hold passes).
func (r *Reconciler[V, P, K]) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	var k K
	b := kubeutil.Controller{Name: k.ControllerName(), For: P(new(V)), SpecOnly: true, Workers: Workers}.Builder(mgr)
	b = Watch(b, mgr.GetClient(), P(new(V)), k.NewList)
	return kubeutil.Complete(b, r, rec)
}
