package skillsource

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "skillsource"

// Reconciler reconciles SkillSources.
type Reconciler struct {
	// Client reads through the manager's cache (with the index package's
	// field indexes) and writes to the API server.
	Client client.Client
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconcile parses one SkillSource's ConfigMap and publishes its skills.
// A missing ConfigMap is the decision's Retry: controller-runtime retries
// with backoff, on top of the ConfigMap watch.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	src := &omniav1.SkillSource{}
	w := kubeutil.StatusWriter{Client: r.Client}
	return kubeutil.ReconcileStatus(ctx, w, req, src, &src.Status, func(ctx context.Context) (Decision, error) {
		cm, err := kubeutil.Lookup[corev1.ConfigMap](ctx, r.Client, types.NamespacedName{Namespace: src.Namespace, Name: src.Spec.ConfigMapRef.Name})
		if err != nil {
			return Decision{}, err
		}
		return Decide(Snapshot{Source: src, ConfigMap: cm, Now: kubeutil.PassTime(r.Now)}), nil
	})
}

// SetupWithManager wires the controller: SkillSources, for spec changes
// only (its own status writes would otherwise enqueue it again), and the
// ConfigMaps they name. rec, when not nil, is called instead of r (tests
// wrap r to count passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	sources := func() client.ObjectList { return &omniav1.SkillSourceList{} }
	b := kubeutil.Controller{Name: ControllerName, For: &omniav1.SkillSource{}, SpecOnly: true, Workers: 3}.Builder(mgr).
		WatchesMetadata(&corev1.ConfigMap{}, kubeutil.EnqueueByIndex(r.Client, sources, index.SkillSourceConfigMap))
	return kubeutil.Complete(b, r, rec)
}
