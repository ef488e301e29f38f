package agentruntime

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/metrics"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/oidc"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "agentruntime"

// Reconciler reconciles AgentRuntimes.
type Reconciler struct {
	// Client reads through the manager's cache (with the index package's
	// field indexes) and writes to the API server.
	Client client.Client
	// Reader reads from the API server what the cache does not hold (the
	// EndpointSlices of the cluster's EndpointSlice controller); Client
	// when nil.
	Reader client.Reader
	// Recorder emits Warning events.
	Recorder events.EventRecorder
	// Config is what the operator adds to every agent.
	Config Config
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// JWKSFetcher reads the key sets of OIDC issuers for the JWKS mirror;
	// an oidc.Fetcher with its defaults when nil.
	JWKSFetcher *oidc.Fetcher
	// Metrics runs rollout analysis queries; nil when the operator has no
	// Prometheus, and analysis steps then hold.
	Metrics MetricsQuerier

	// keda is what the controller knows of KEDA on its API server.
	keda kedaSupport

	// superseded holds the agent versions this controller's writes
	// replaced, so a pass that reads one from a lagging cache waits.
	superseded kubeutil.Superseded
}

// laggingReadRequeue is when a pass that found the cache behind its
// controller's last write looks again, should the watch event that
// carries the write not bring it back first.
const laggingReadRequeue = time.Second

// Reconcile runs one pass over an agent: it keeps the finalizer, reads
// the snapshot (the agent, its references, the objects it owns), and has
// decide plan the writes, which settle makes. decide is the controller's
// logic; this is the I/O around it.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	a := &omniav1.AgentRuntime{}
	if err := r.Client.Get(ctx, req.NamespacedName, a); err != nil {
		if apierrors.IsNotFound(err) {
			// The delete event brings the pass here: the agent's series go
			// with it.
			metrics.DeleteAgentRuntime(req.Namespace, req.Name)
			r.superseded.Forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if r.superseded.Stale(a) {
		// Acting on the agent as it was before this controller's last
		// write would take a step again or undo one; the write's own watch
		// event brings the pass back.
		return reconcile.Result{RequeueAfter: laggingReadRequeue}, nil
	}
	if a.DeletionTimestamp != nil {
		metrics.DeleteAgentRuntime(req.Namespace, req.Name)
		// Owned objects go with the agent through their owner references.
		return reconcile.Result{}, r.setFinalizer(ctx, a, false)
	}
	// The metrics show the status stored when the pass ends, however it
	// ends: cur follows each write that succeeded.
	m := metrics.AgentRuntimePass{Before: a.Status.DeepCopy()}
	cur := a
	defer func() {
		m.After = &cur.Status
		metrics.SetAgentRuntime(req.Namespace, req.Name, m)
	}()
	if err := r.setFinalizer(ctx, a, true); err != nil {
		return reconcile.Result{}, err
	}
	s, err := r.snapshot(ctx, a, kubeutil.PassTime(r.Now))
	if err != nil {
		return reconcile.Result{}, err
	}
	p, cur, err := r.settle(ctx, s, decide)
	if err != nil {
		return reconcile.Result{}, err
	}
	m.RolledBack = p.rolledBack
	return r.finish(ctx, cur, p)
}

// soonest is the smallest positive duration, 0 when none is positive.
func soonest(ds ...time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		if d > 0 && (m == 0 || d < m) {
			m = d
		}
	}
	return m
}

// joinStatus adds a failed status write to the error that ended the pass.
// Only err is wrapped, so errors.Is/As on the result (controller-runtime's
// terminal-error check among them) match the pass's own failure, never the
// status write's.
func joinStatus(err, statusErr error) error {
	if statusErr != nil {
		return fmt.Errorf("%w (and writing status: %v)", err, statusErr) //nolint:errorlint // statusErr is text on purpose: only the pass's own error may be matched
	}
	return err
}

// setFinalizer adds or removes the agent's finalizer. The merge patch
// carries the whole finalizer list as this pass read it, so it would
// drop a finalizer another actor added since; the optimistic lock
// (resourceVersion in the patch) turns that race into a conflict, retried
// with backoff on a fresh read.
func (r *Reconciler) setFinalizer(ctx context.Context, a *omniav1.AgentRuntime, want bool) error {
	if controllerutil.ContainsFinalizer(a, omniav1.AgentRuntimeFinalizer) == want {
		return nil
	}
	patch := client.MergeFromWithOptions(a.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if want {
		controllerutil.AddFinalizer(a, omniav1.AgentRuntimeFinalizer)
	} else {
		controllerutil.RemoveFinalizer(a, omniav1.AgentRuntimeFinalizer)
	}
	before := a.ResourceVersion
	if err := r.Client.Patch(ctx, a, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("update finalizer of AgentRuntime %s/%s: %w", a.Namespace, a.Name, err)
	}
	r.superseded.Wrote(a, before)
	return nil
}

// writeStatus writes st as the agent's status. a changes only when the
// write succeeds, so it stays the agent as stored. A conflict is dropped:
// the change that caused it brings the next pass.
func (r *Reconciler) writeStatus(ctx context.Context, a *omniav1.AgentRuntime, st *omniav1.AgentRuntimeStatus) error {
	if equality.Semantic.DeepEqual(a.Status, *st) {
		return nil
	}
	upd := a.DeepCopy()
	upd.Status = *st
	if err := r.Client.Status().Update(ctx, upd); err != nil {
		if kubeutil.IgnoreConflict(err) != nil {
			return fmt.Errorf("write status of AgentRuntime %s/%s: %w", a.Namespace, a.Name, err)
		}
		return nil
	}
	r.superseded.Wrote(upd, a.ResourceVersion)
	*a = *upd
	return nil
}

// transientAPIError reports an API failure a retry may not meet again
// (unavailable, throttled, timed out, internal, a conflict), as opposed to
// a refusal that needs an edit (an object someone else owns, an invalid
// one). Only the latter fails the AgentRuntime. AlreadyExists is a
// conflict too: the create followed a cache read that had not yet seen
// the object, and the retry reads it and judges ownership then.
func transientAPIError(err error) bool {
	return err != nil && (apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) || apierrors.IsConflict(err) ||
		apierrors.IsAlreadyExists(err) || apierrors.IsUnexpectedServerError(err))
}
