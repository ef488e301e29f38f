package agentruntime

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// SetupWithManager wires the controller: it owns the Deployments, Service,
// HPA, KEDA ScaledObject, PodDisruptionBudget, activator EndpointSlice, facade ServiceAccount,
// Role and RoleBinding, OIDC key Secret and tools ConfigMap it builds, and
// maps every PromptPack, SkillSource, ToolRegistry, ToolPolicy, Provider
// and credential Secret change back to the agents that reference it
// through field indexes, every Workspace change to the agents of the namespace
// it names, and every SessionRetentionPolicy and MemoryPolicy change to
// the agents of its namespace, and every agent pod's creation and
// deletion to its agent, so no timer is needed to notice a change. Up to three agents
// reconcile at once. rec, when not nil, is called instead of r (tests
// count passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	b := kubeutil.Controller{Name: ControllerName, For: &omniav1.AgentRuntime{}, Workers: 3}.Builder(mgr).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		// The activator route: a deleted or edited slice is repaired at once.
		Owns(&discoveryv1.EndpointSlice{}).
		// The facade's access: a deleted or edited one is repaired at once.
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		// The OIDC key mirror: a deleted or edited mirror is repaired at
		// once, not at the next 6-hour refresh.
		Owns(&corev1.Secret{}).
		// The tools ConfigMap: metadata only, as every ConfigMap watch of
		// this binary (kubeutil.ApplyCacheOptions); an edit or deletion
		// brings the pass, which reads it from the API server.
		Owns(&corev1.ConfigMap{}, builder.OnlyMetadata).
		Watches(&omniav1.ToolPolicy{}, r.agentsForPolicy()).
		Watches(&omniav1.PromptPack{}, handler.EnqueueRequestsFromMapFunc(r.agentsForPack)).
		// A skill document edited in place changes its SkillSource's
		// contentChecksum, not the pack's status.skills: this watch
		// brings the pass that rolls the pods (skills.go).
		Watches(&omniav1.SkillSource{}, handler.EnqueueRequestsFromMapFunc(r.agentsForSkillSource)).
		Watches(&omniav1.ToolRegistry{}, handler.EnqueueRequestsFromMapFunc(r.agentsByKey(index.AgentToolRegistry))).
		Watches(&omniav1.Provider{}, handler.EnqueueRequestsFromMapFunc(r.agentsByKey(index.AgentProvider))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.agentsForSecret)).
		Watches(&omniav1.Workspace{}, r.agentsForWorkspace()).
		// The policies in force reach the pods (policies.go). Every agent
		// of the namespace: those a policy selects now and those it
		// selected before are all there, and which one is in force is
		// decided among all of them. Status writes bump no generation and
		// change no label, so they enqueue nothing.
		Watches(&omniav1.SessionRetentionPolicy{}, handler.EnqueueRequestsFromMapFunc(r.agentsOfNamespace), policyChanged).
		Watches(&omniav1.MemoryPolicy{}, handler.EnqueueRequestsFromMapFunc(r.agentsOfNamespace), policyChanged).
		// An agent pod coming or going changes which facade reports count
		// (sessions.go); its many status updates change nothing here.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(agentOfPod), podCameOrWent)
	// controller-runtime cannot watch a kind the API server does not
	// serve, and a manager must run without KEDA: the ScaledObject watch is
	// wired now only when KEDA's CRD is installed, else started by the
	// first pass that finds it installed (keda.go).
	served, err := kindServed(mgr, ScaledObjectGVK)
	if err != nil {
		return err
	}
	if served {
		b = b.Owns(scaledObjectObject())
	}
	if rec == nil {
		rec = r
	}
	c, err := b.Build(rec)
	if err != nil {
		return err
	}
	r.keda.cache = mgr.GetCache()
	r.keda.watching = served
	r.keda.startWatch = func() error {
		return c.Watch(source.Kind[client.Object](mgr.GetCache(), scaledObjectObject(),
			handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &omniav1.AgentRuntime{}, handler.OnlyControllerOwner())))
	}
	return nil
}

// policyChanged passes a policy's creation, deletion and every update of
// its spec (generation) or labels, never a status write.
var policyChanged = builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))

// podCameOrWent passes a pod's creation and deletion only.
var podCameOrWent = builder.WithPredicates(predicate.Funcs{
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
})

// agentOfPod maps an agent pod to its AgentRuntime, named by its
// app.kubernetes.io/instance label.
func agentOfPod(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[LabelName] != AgentAppName || l[LabelInstance] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: l[LabelInstance]}}}
}

// agentsOfNamespace maps an object to every agent of its namespace.
func (r *Reconciler) agentsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return r.list(ctx, client.InNamespace(o.GetNamespace()))
}

// kindServed reports whether the API server serves gvk; a NoMatch from
// the RESTMapper is false, any other failure an error.
func kindServed(mgr ctrl.Manager, gvk schema.GroupVersionKind) (bool, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	}
	return false, fmt.Errorf("look up %s: %w", gvk, err)
}

// scaledObjectObject is an empty ScaledObject, the type of its watch.
func scaledObjectObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ScaledObjectGVK)
	return u
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

// agentsForSecret maps a Secret to the agents whose Providers read it
// (its data is hashed into their pod template) and to those whose
// ToolRegistry's handlers name it (whether it may be mounted is judged
// per pass, ToolSecretsReady).
func (r *Reconciler) agentsForSecret(ctx context.Context, o client.Object) []reconcile.Request {
	var ps omniav1.ProviderList
	if err := r.Client.List(ctx, &ps, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.ProviderSecret: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "map Secret to Providers", "secret", client.ObjectKeyFromObject(o))
		return nil
	}
	seen := map[reconcile.Request]bool{}
	var out []reconcile.Request
	add := func(reqs []reconcile.Request) {
		for _, req := range reqs {
			if !seen[req] {
				seen[req] = true
				out = append(out, req)
			}
		}
	}
	for i := range ps.Items {
		add(r.list(ctx, client.MatchingFields{index.AgentProvider: index.Key(ps.Items[i].Namespace, ps.Items[i].Name)}))
	}
	// Few registries per namespace, read from the cache: no index needed.
	var trs omniav1.ToolRegistryList
	if err := r.Client.List(ctx, &trs, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "map Secret to ToolRegistries", "secret", client.ObjectKeyFromObject(o))
		return out
	}
	for i := range trs.Items {
		if slices.Contains(toolSecretNames(&trs.Items[i].Spec), o.GetName()) {
			add(r.list(ctx, client.MatchingFields{index.AgentToolRegistry: index.Key(trs.Items[i].Namespace, trs.Items[i].Name)}))
		}
	}
	return out
}

// agentsForPolicy enqueues the agents of the registry a ToolPolicy
// selects: the policy is in their tools file. An update that moves the
// selector enqueues the agents of the registry it left too.
func (r *Reconciler) agentsForPolicy() handler.Funcs {
	return kubeutil.EnqueueOldAndNew(func(ctx context.Context, o client.Object) []reconcile.Request {
		p, ok := o.(*omniav1.ToolPolicy)
		if !ok || p.Spec.Selector.Registry == "" {
			return nil
		}
		return r.list(ctx, client.MatchingFields{index.AgentToolRegistry: index.Key(p.Namespace, p.Spec.Selector.Registry)})
	}, nil)
}

// agentsForWorkspace enqueues every agent of the namespace a Workspace
// names: its name, pod defaults and service-group autoscaling are read at
// reconcile time, not through a reference on the agent. An update that
// moves the Workspace to another namespace enqueues the agents of both,
// so those it left drop its defaults.
func (r *Reconciler) agentsForWorkspace() handler.Funcs {
	return kubeutil.EnqueueOldAndNew(func(ctx context.Context, o client.Object) []reconcile.Request {
		w, ok := o.(*omniav1.Workspace)
		if !ok || w.Spec.Namespace.Name == "" {
			return nil
		}
		return r.list(ctx, client.InNamespace(w.Spec.Namespace.Name))
	}, func(before, after client.Object) bool {
		o, okOld := before.(*omniav1.Workspace)
		n, okNew := after.(*omniav1.Workspace)
		return okOld && okNew && o.Spec.Namespace.Name != n.Spec.Namespace.Name
	})
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
