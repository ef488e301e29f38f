package connection

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "connection"

// Reconciler reconciles Connections.
type Reconciler struct {
	// Client reads through the manager's cache, whose Secrets are only
	// those labelled as credentials (kubeutil.ApplyCacheOptions), and
	// writes to the API server.
	Client client.Client
	// Recorder emits the fault events; none are emitted when nil.
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconcile checks one Connection's credential.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c := &omniav1.Connection{}
	w := kubeutil.StatusWriter{Client: r.Client, Recorder: r.Recorder, Action: "Check"}
	return kubeutil.ReconcileStatus(ctx, w, req, c, &c.Status, func(ctx context.Context) (Decision, error) {
		s := Snapshot{Connection: c, Now: kubeutil.PassTime(r.Now)}
		if cred := c.Spec.Credential; cred != nil {
			var err error
			if s.Secret, err = kubeutil.Lookup[corev1.Secret](ctx, r.Client, types.NamespacedName{Namespace: c.Namespace, Name: cred.SecretRef.Name}); err != nil {
				return Decision{}, err
			}
		}
		return Decide(s), nil
	})
}

// SetupWithManager wires the controller: Connections, for spec changes
// only (its own status writes would otherwise enqueue it again), and the
// Secrets they name, so a Secret created, labelled, edited or deleted
// reaches its Connections. It runs controller-runtime's default of one
// worker. rec, when not nil, is called instead of r (tests count or hold
// passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	conns := func() client.ObjectList { return &omniav1.ConnectionList{} }
	b := kubeutil.Controller{Name: ControllerName, For: &omniav1.Connection{}, SpecOnly: true}.Builder(mgr).
		Watches(&corev1.Secret{}, kubeutil.EnqueueByIndex(r.Client, conns, index.ConnectionSecret))
	return kubeutil.Complete(b, r, rec)
}
