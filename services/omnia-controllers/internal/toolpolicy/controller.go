package toolpolicy

import (
	"context"
	"time"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "toolpolicy"

// Reconciler reconciles ToolPolicies.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// Recorder emits the compile events; none are emitted when nil.
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconcile compiles one ToolPolicy and records the result.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &omniav1.ToolPolicy{}
	w := kubeutil.StatusWriter{Client: r.Client, Recorder: r.Recorder, Action: "Compile"}
	return kubeutil.ReconcileStatus(ctx, w, req, p, &p.Status, func(context.Context) (Decision, error) {
		return Decide(Snapshot{Policy: p, Now: kubeutil.PassTime(r.Now)}), nil
	})
}

// SetupWithManager wires the controller: ToolPolicies, for spec changes
// only, since a policy's status depends on its spec alone and its own
// status writes would otherwise enqueue it again. It runs
// controller-runtime's default of one worker. rec, when not nil, is called
// instead of r (tests count or hold passes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error {
	b := kubeutil.Controller{Name: ControllerName, For: &omniav1.ToolPolicy{}, SpecOnly: true}.Builder(mgr)
	return kubeutil.Complete(b, r, rec)
}
