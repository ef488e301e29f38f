package agentruntime

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
)

// SetupWithManager wires the controller: it owns the Deployment, Service
// and HPA it builds, and maps every PromptPack, ToolRegistry, Provider and
// credential Secret change back to the agents that reference it through
// field indexes, so no timer is needed to notice a change. Up to three
// agents reconcile at once. rec, when not nil, is called instead of r
// (tests count passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	if rec == nil {
		rec = r
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&omniav1.AgentRuntime{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		Watches(&omniav1.PromptPack{}, handler.EnqueueRequestsFromMapFunc(r.agentsForPack)).
		Watches(&omniav1.ToolRegistry{}, handler.EnqueueRequestsFromMapFunc(r.agentsByKey(index.AgentToolRegistry))).
		Watches(&omniav1.Provider{}, handler.EnqueueRequestsFromMapFunc(r.agentsByKey(index.AgentProvider))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.agentsForSecret)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 3}).
		Complete(rec)
}

// agentsForPack maps a PromptPack to the agents of its namespace whose
// promptPackRef names its pack name (not its object name).
func (r *Reconciler) agentsForPack(ctx context.Context, o client.Object) []reconcile.Request {
	p, ok := o.(*omniav1.PromptPack)
	if !ok {
		return nil
	}
	return r.list(ctx, client.InNamespace(p.Namespace), client.MatchingFields{index.AgentPromptPack: p.Spec.PackName})
}

// agentsByKey maps an object to the agents whose "<ns>/<name>" index
// holds it, in any namespace (a cross-namespace reference is still found,
// so its agent can report it).
func (r *Reconciler) agentsByKey(field string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.list(ctx, client.MatchingFields{field: index.Key(o.GetNamespace(), o.GetName())})
	}
}

// agentsForSecret maps a Secret to the agents whose Providers read it:
// its data is hashed into their pod template.
func (r *Reconciler) agentsForSecret(ctx context.Context, o client.Object) []reconcile.Request {
	var ps omniav1.ProviderList
	if err := r.Client.List(ctx, &ps, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.ProviderSecret: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "map Secret to Providers", "secret", client.ObjectKeyFromObject(o))
		return nil
	}
	seen := map[reconcile.Request]bool{}
	var out []reconcile.Request
	for i := range ps.Items {
		for _, req := range r.list(ctx, client.MatchingFields{index.AgentProvider: index.Key(ps.Items[i].Namespace, ps.Items[i].Name)}) {
			if !seen[req] {
				seen[req] = true
				out = append(out, req)
			}
		}
	}
	return out
}

func (r *Reconciler) list(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var ars omniav1.AgentRuntimeList
	if err := r.Client.List(ctx, &ars, opts...); err != nil {
		log.FromContext(ctx).Error(err, "map to AgentRuntimes")
		return nil
	}
	out := make([]reconcile.Request, 0, len(ars.Items))
	for i := range ars.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ars.Items[i])})
	}
	return out
}
