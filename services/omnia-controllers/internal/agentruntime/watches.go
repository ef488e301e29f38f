package agentruntime

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// SetupWithManager wires the controller: it owns the Deployments, Service,
// HPA, PodDisruptionBudget, facade ServiceAccount, Role and RoleBinding and
// OIDC key Secret it builds, and maps every PromptPack, ToolRegistry, Provider and
// credential Secret change back to the agents that reference it through
// field indexes, and every Workspace change to the agents of the namespace
// it names, so no timer is needed to notice a change. Up to three agents
// reconcile at once. rec, when not nil, is called instead of r (tests
// count passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	b := kubeutil.Controller{Name: ControllerName, For: &omniav1.AgentRuntime{}, Workers: 3}.Builder(mgr).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		// The facade's access: a deleted or edited one is repaired at once.
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		// The OIDC key mirror: a deleted or edited mirror is repaired at
		// once, not at the next 6-hour refresh.
		Owns(&corev1.Secret{}).
		Watches(&omniav1.PromptPack{}, handler.EnqueueRequestsFromMapFunc(r.agentsForPack)).
		Watches(&omniav1.ToolRegistry{}, handler.EnqueueRequestsFromMapFunc(r.agentsByKey(index.AgentToolRegistry))).
		Watches(&omniav1.Provider{}, handler.EnqueueRequestsFromMapFunc(r.agentsByKey(index.AgentProvider))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.agentsForSecret)).
		Watches(&omniav1.Workspace{}, r.agentsForWorkspace())
	return kubeutil.Complete(b, r, rec)
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

// agentsForWorkspace enqueues every agent of the namespace a Workspace
// names: its name, pod defaults and service-group autoscaling are read at
// reconcile time, not through a reference on the agent. An update that
// moves the Workspace to another namespace enqueues the agents of both,
// so those it left drop its defaults (a map function sees only the new
// object, hence the update handler).
func (r *Reconciler) agentsForWorkspace() handler.Funcs {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
		w, ok := o.(*omniav1.Workspace)
		if !ok || w.Spec.Namespace.Name == "" {
			return
		}
		for _, req := range r.list(ctx, client.InNamespace(w.Spec.Namespace.Name)) {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.ObjectNew)
			o, okOld := e.ObjectOld.(*omniav1.Workspace)
			n, okNew := e.ObjectNew.(*omniav1.Workspace)
			if okOld && okNew && o.Spec.Namespace.Name != n.Spec.Namespace.Name {
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
