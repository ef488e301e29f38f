package skillsource

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
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
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	src := &omniav1.SkillSource{}
	if err := r.Client.Get(ctx, req.NamespacedName, src); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if src.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	s := Snapshot{Source: src, Now: metav1.NewTime(now().Truncate(time.Second))}
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: src.Namespace, Name: src.Spec.ConfigMapRef.Name}, cm)
	switch {
	case err == nil:
		s.ConfigMap = cm
	case !apierrors.IsNotFound(err):
		return reconcile.Result{}, fmt.Errorf("get ConfigMap %s/%s: %w", src.Namespace, src.Spec.ConfigMapRef.Name, err)
	}
	d := Decide(s)
	if d.Changed {
		src.Status = d.Status
		// A 409 is returned, not dropped: the SkillSource watch passes spec
		// changes only, so no later event would bring the pass back.
		if err := r.Client.Status().Update(ctx, src); err != nil {
			return reconcile.Result{}, fmt.Errorf("write status of SkillSource %s: %w", req, err)
		}
	}
	// d.Retry is a missing ConfigMap: returning it makes controller-runtime
	// retry with backoff, on top of the ConfigMap watch.
	return reconcile.Result{}, d.Retry
}

// SetupWithManager wires the controller: SkillSources, for spec changes
// only (its own status writes would otherwise enqueue it again), and the
// ConfigMaps they name. rec, when not nil, is called instead of r (tests
// wrap r to count passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	if rec == nil {
		rec = r
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&omniav1.SkillSource{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(kubeutil.ByIndex(r.Client, func() client.ObjectList { return &omniav1.SkillSourceList{} }, index.SkillSourceConfigMap))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 3}).
		Complete(rec)
}
