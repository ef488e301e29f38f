package toolregistry

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "toolregistry"

// Reconciler reconciles ToolRegistries.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// Prober checks endpoints when probing is on; TCPProber when nil.
	Prober Prober
	// Catalog lists platform services' tools; DefaultPlatformCatalog when nil.
	Catalog PlatformCatalog
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconcile discovers one registry's tools and judges its conditions.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	tr := &omniav1.ToolRegistry{}
	if err := r.Client.Get(ctx, req.NamespacedName, tr); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	snap, err := r.snapshot(ctx, tr)
	if err != nil {
		return reconcile.Result{}, err
	}
	d := Decide(snap)
	if d.Changed {
		tr.Status = d.Status
		// A 409 is returned, not dropped: this controller's watch filters
		// status-only events, so no later event would bring the pass back.
		if err := r.Client.Status().Update(ctx, tr); err != nil {
			return reconcile.Result{}, fmt.Errorf("write status of ToolRegistry %s: %w", req, err)
		}
	}
	return reconcile.Result{RequeueAfter: d.RequeueAfter}, nil
}

func (r *Reconciler) snapshot(ctx context.Context, tr *omniav1.ToolRegistry) (Snapshot, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	catalog := r.Catalog
	if catalog == nil {
		catalog = DefaultPlatformCatalog
	}
	s := Snapshot{Registry: tr, Catalog: catalog, Now: metav1.NewTime(now().Truncate(time.Second)),
		SandboxClasses: map[string]*omniav1.SandboxClass{}, Connections: map[string]*omniav1.Connection{}}

	var pols omniav1.ToolPolicyList
	if err := r.Client.List(ctx, &pols, client.InNamespace(tr.Namespace), client.MatchingFields{index.ToolPolicyRegistry: tr.Name}); err != nil {
		return s, fmt.Errorf("list ToolPolicies of %s/%s: %w", tr.Namespace, tr.Name, err)
	}
	s.Policies = pols.Items
	for _, n := range tr.Spec.SandboxClassNames() {
		c := &omniav1.SandboxClass{}
		if found, err := r.get(ctx, tr.Namespace, n, c); err != nil {
			return s, err
		} else if found {
			s.SandboxClasses[n] = c
		}
	}
	for _, n := range tr.Spec.ConnectionNames() {
		c := &omniav1.Connection{}
		if found, err := r.get(ctx, tr.Namespace, n, c); err != nil {
			return s, err
		} else if found {
			s.Connections[n] = c
		}
	}
	if Probing(tr) {
		s.Probes = r.probe(ctx, tr, catalog)
	}
	return s, nil
}

func (r *Reconciler) get(ctx context.Context, ns, name string, obj client.Object) (bool, error) {
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("get %T %s/%s: %w", obj, ns, name, err)
}

// probe dials the network endpoints of the valid handlers.
func (r *Reconciler) probe(ctx context.Context, tr *omniav1.ToolRegistry, catalog PlatformCatalog) map[string]error {
	seen := map[string]bool{}
	var eps []string
	for i := range tr.Spec.Handlers {
		h := &tr.Spec.Handlers[i]
		if ValidateHandler(h, catalog) != nil {
			continue
		}
		if e := Endpoint(h); Probeable(e) && !seen[e] {
			seen[e] = true
			eps = append(eps, e)
		}
	}
	p := r.Prober
	if p == nil {
		p = TCPProber{}
	}
	return p.Probe(ctx, eps, ProbeTimeout(tr))
}

// SetupWithManager wires the controller. The registry itself is watched for
// spec changes only: discovery reads the spec, and the controller's own
// status writes would otherwise re-enqueue it in a loop. ToolPolicies,
// SandboxClasses and Connections are watched because the PolicyBound,
// SandboxesValid and SandboxConnectionsValid conditions are judged against
// them. rec, when not nil, is called instead of r (tests count passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	if rec == nil {
		rec = r
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&omniav1.ToolRegistry{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&omniav1.ToolPolicy{}, policyHandler()).
		Watches(&omniav1.SandboxClass{}, handler.EnqueueRequestsFromMapFunc(r.registriesBy(index.RegistrySandboxClass))).
		Watches(&omniav1.Connection{}, handler.EnqueueRequestsFromMapFunc(r.registriesBy(index.RegistryConnection))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 3}).
		Complete(rec)
}

// policyHandler enqueues the registry a ToolPolicy selects; on an update
// that moves the selector, the registry it left too, so that one's
// PolicyBound goes False.
func policyHandler() handler.Funcs {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
		if p, ok := o.(*omniav1.ToolPolicy); ok && p.Spec.Selector.Registry != "" {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.Selector.Registry}})
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.ObjectOld)
			add(q, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
	}
}

func (r *Reconciler) registriesBy(field string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var regs omniav1.ToolRegistryList
		if err := r.Client.List(ctx, &regs, client.InNamespace(o.GetNamespace()), client.MatchingFields{field: o.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "map to ToolRegistries", "object", client.ObjectKeyFromObject(o))
			return nil
		}
		out := make([]reconcile.Request, 0, len(regs.Items))
		for i := range regs.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&regs.Items[i])})
		}
		return out
	}
}
