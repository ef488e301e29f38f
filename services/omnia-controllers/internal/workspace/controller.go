package workspace

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
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

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "workspace"

// MaxConcurrentReconciles is the worker count, fixed at three like the
// AgentRuntime and ToolRegistry controllers'; no operator flag changes it
// (docs/omnia-controllers.md).
const MaxConcurrentReconciles = 3

// Reconciler reconciles Workspaces.
type Reconciler struct {
	// Client reads through the manager's cache (with the index package's
	// field indexes) and writes to the API server.
	Client client.Client
	// Recorder emits the NamespaceClaimed event; none when nil.
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconcile claims one Workspace's namespace. API failures are returned
// (controller-runtime retries with backoff); a refused namespace is a
// status, not an error; success asks for no timer.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ws := &omniav1.Workspace{}
	// A Workspace being deleted is left alone: the namespace outlives it,
	// its label then a stale claim that another Workspace may take over.
	if ok, err := kubeutil.Live(ctx, r.Client, req.NamespacedName, ws); !ok {
		return reconcile.Result{}, err
	}
	s, err := r.snapshot(ctx, ws)
	if err != nil {
		return reconcile.Result{}, err
	}
	d := Decide(s)
	if err := r.apply(ctx, ws, s.Namespace, d); err != nil {
		return reconcile.Result{}, err
	}
	kubeutil.Emit(r.Recorder, ws, "Reconcile", d.Events)
	if d.Changed {
		ws.Status = d.Status
		// A conflict is dropped: the watch on Workspaces has no predicate,
		// so the newer write's event brings a fresh pass.
		if err := r.Client.Status().Update(ctx, ws); kubeutil.IgnoreConflict(err) != nil {
			return reconcile.Result{}, fmt.Errorf("write status of Workspace %s: %w", ws.Name, err)
		}
	}
	return reconcile.Result{}, nil
}

func (r *Reconciler) snapshot(ctx context.Context, ws *omniav1.Workspace) (Snapshot, error) {
	s := Snapshot{Workspace: ws, Now: kubeutil.PassTime(r.Now)}
	name := ws.Spec.Namespace.Name
	ns := &corev1.Namespace{}
	if found, err := r.get(ctx, name, ns); err != nil {
		return s, err
	} else if found {
		s.Namespace = ns
	}
	if s.Namespace != nil {
		if owner := s.Namespace.Labels[omniav1.LabelWorkspace]; owner != "" && owner != ws.Name {
			other := &omniav1.Workspace{}
			if found, err := r.get(ctx, owner, other); err != nil {
				return s, err
			} else if found {
				s.Claimant = other
			}
		}
	}
	var labelled corev1.NamespaceList
	if err := r.Client.List(ctx, &labelled, client.MatchingLabels{omniav1.LabelWorkspace: ws.Name}); err != nil {
		return s, fmt.Errorf("list namespaces labelled for Workspace %s: %w", ws.Name, err)
	}
	for i := range labelled.Items {
		s.Labelled = append(s.Labelled, labelled.Items[i].Name)
	}
	return s, nil
}

// get reads a cluster-scoped object (a Namespace or a Workspace) by name.
func (r *Reconciler) get(ctx context.Context, name string, obj client.Object) (bool, error) {
	return kubeutil.Get(ctx, r.Client, types.NamespacedName{Name: name}, obj)
}

// apply makes the namespace writes. Label changes are patches guarded by
// the resourceVersion read, so a label someone else changed meanwhile is
// never overwritten blindly: the conflict is returned and retried.
func (r *Reconciler) apply(ctx context.Context, ws *omniav1.Workspace, ns *corev1.Namespace, d Decision) error {
	if d.Create != nil {
		if err := r.Client.Create(ctx, d.Create); err != nil {
			return fmt.Errorf("create namespace %s for Workspace %s: %w", d.Create.Name, ws.Name, err)
		}
	}
	if d.Label {
		if err := r.patchLabel(ctx, ns, ws.Name); err != nil {
			return err
		}
	}
	for _, name := range d.Release {
		old := &corev1.Namespace{}
		found, err := r.get(ctx, name, old)
		if err != nil {
			return err
		}
		if !found || old.Labels[omniav1.LabelWorkspace] != ws.Name {
			continue
		}
		if err := r.patchLabel(ctx, old, ""); err != nil {
			return err
		}
	}
	return nil
}

// patchLabel sets the workspace label of ns to value, or removes it when
// value is empty.
func (r *Reconciler) patchLabel(ctx context.Context, ns *corev1.Namespace, value string) error {
	base := ns.DeepCopy()
	labels := ns.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	if value == "" {
		delete(labels, omniav1.LabelWorkspace)
	} else {
		labels[omniav1.LabelWorkspace] = value
	}
	ns.SetLabels(labels)
	if err := r.Client.Patch(ctx, ns, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("label namespace %s: %w", ns.Name, err)
	}
	return nil
}

// SetupWithManager wires the controller. Namespaces are watched and mapped
// back to the Workspace their label names and to every Workspace that
// names them, so a removed or changed label is repaired and a Workspace
// waiting for a namespace hears when it is released. A deleted Workspace
// re-enqueues the others naming its namespace: its label stays behind as
// a stale claim they may now take over. rec, when not nil, is called
// instead of r (tests count passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	b := kubeutil.Controller{Name: ControllerName, For: &omniav1.Workspace{}, Workers: MaxConcurrentReconciles}.Builder(mgr).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.workspacesForNamespace)).
		Watches(&omniav1.Workspace{}, r.siblingsOnDelete())
	return kubeutil.Complete(b, r, rec)
}

func (r *Reconciler) workspacesForNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	if owner := o.GetLabels()[omniav1.LabelWorkspace]; owner != "" {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: owner}})
	}
	return append(out, r.naming(ctx, o.GetName())...)
}

// naming lists the Workspaces whose spec.namespace.name is ns.
func (r *Reconciler) naming(ctx context.Context, ns string) []reconcile.Request {
	var wss omniav1.WorkspaceList
	if err := r.Client.List(ctx, &wss, client.MatchingFields{index.WorkspaceNamespace: ns}); err != nil {
		log.FromContext(ctx).Error(err, "map namespace to Workspaces", "namespace", ns)
		return nil
	}
	out := make([]reconcile.Request, 0, len(wss.Items))
	for i := range wss.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: wss.Items[i].Name}})
	}
	return out
}

func (r *Reconciler) siblingsOnDelete() handler.Funcs {
	return handler.Funcs{
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			ws, ok := e.Object.(*omniav1.Workspace)
			if !ok {
				return
			}
			for _, req := range r.naming(ctx, ws.Spec.Namespace.Name) {
				if req.Name != ws.Name {
					q.Add(req)
				}
			}
		},
	}
}
