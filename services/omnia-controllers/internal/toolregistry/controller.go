package toolregistry

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
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
	catalog := r.Catalog
	if catalog == nil {
		catalog = DefaultPlatformCatalog
	}
	s := Snapshot{Registry: tr, Catalog: catalog, Now: kubeutil.PassTime(r.Now),
		SandboxClasses: map[string]*omniav1.SandboxClass{}, Connections: map[string]*omniav1.Connection{}}

	var pols omniav1.ToolPolicyList
	if err := r.Client.List(ctx, &pols, client.InNamespace(tr.Namespace), client.MatchingFields{index.ToolPolicyRegistry: tr.Name}); err != nil {
		return s, fmt.Errorf("list ToolPolicies of %s/%s: %w", tr.Namespace, tr.Name, err)
	}
	s.Policies = pols.Items
	if err := getAll(ctx, r.Client, tr.Namespace, tr.Spec.SandboxClassNames(), s.SandboxClasses); err != nil {
		return s, err
	}
	if err := getAll(ctx, r.Client, tr.Namespace, tr.Spec.ConnectionNames(), s.Connections); err != nil {
		return s, err
	}
	if Probing(tr) {
		s.Probes = r.probe(ctx, tr, catalog)
	}
	return s, nil
}

// getAll reads the named objects of ns into into, by name; a missing one
// is left out, for the decision to judge.
func getAll[T any, P interface {
	*T
	client.Object
}](ctx context.Context, c client.Reader, ns string, names []string, into map[string]P) error {
	for _, n := range names {
		obj := P(new(T))
		found, err := kubeutil.Get(ctx, c, types.NamespacedName{Namespace: ns, Name: n}, obj)
		if err != nil {
			return err
		}
		if found {
			into[n] = obj
		}
	}
	return nil
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
	registries := func() client.ObjectList { return &omniav1.ToolRegistryList{} }
	b := kubeutil.Controller{Name: ControllerName, For: &omniav1.ToolRegistry{}, SpecOnly: true, Workers: 3}.Builder(mgr).
		Watches(&omniav1.ToolPolicy{}, policyHandler()).
		Watches(&omniav1.SandboxClass{}, kubeutil.EnqueueByIndex(r.Client, registries, index.RegistrySandboxClass)).
		Watches(&omniav1.Connection{}, kubeutil.EnqueueByIndex(r.Client, registries, index.RegistryConnection))
	return kubeutil.Complete(b, r, rec)
}

// policyHandler enqueues the registry a ToolPolicy selects; on an update
// that moves the selector, the registry it left too, so that one's
// PolicyBound goes False.
func policyHandler() handler.Funcs {
	return kubeutil.EnqueueOldAndNew(func(_ context.Context, o client.Object) []reconcile.Request {
		if p, ok := o.(*omniav1.ToolPolicy); ok && p.Spec.Selector.Registry != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.Selector.Registry}}}
		}
		return nil
	}, nil)
}
