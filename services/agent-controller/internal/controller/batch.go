package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	batchpb "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
)

// batchCallTimeout bounds one call to batch-poller.
const batchCallTimeout = 30 * time.Second

// providers maps the status' provider names to the contract's.
var providers = map[agentsv1alpha1.BatchProvider]batchpb.Provider{
	agentsv1alpha1.BatchProviderAnthropic: batchpb.Provider_PROVIDER_ANTHROPIC,
	agentsv1alpha1.BatchProviderOpenAI:    batchpb.Provider_PROVIDER_OPENAI,
	agentsv1alpha1.BatchProviderGemini:    batchpb.Provider_PROVIDER_GEMINI,
}

// batchRef is the batch-poller view of a's batch.
func batchRef(a *agentsv1alpha1.Agent, def *agentsv1alpha1.AgentDefinition, model string) *batchpb.BatchRef {
	if decision.ProviderFor(model) != a.Status.BatchProvider {
		// The recipe's model was edited after submit to one the batch's
		// provider does not serve: the batch is still that provider's, so
		// ask without a model (the provider's own CLI lines) rather than
		// with one batch-poller must refuse.
		model = ""
	}
	return &batchpb.BatchRef{
		Run:      batchRunOf(a, def),
		Provider: providers[a.Status.BatchProvider],
		BatchId:  a.Status.BatchID,
		Model:    model,
	}
}

func batchRunOf(a *agentsv1alpha1.Agent, def *agentsv1alpha1.AgentDefinition) *batchpb.Run {
	r := &batchpb.Run{Namespace: a.Namespace, Agent: a.Name, Uid: string(a.UID)}
	if def != nil {
		r.ApiKeyKey = decision.APIKeyKey(&def.Spec, a.Status.BatchProvider)
	}
	return r
}

// submit hands the plan's batch to batch-poller and records its id in the
// plan's status. A refusal batch-poller will repeat (bad request, missing
// API key) fails the run with its message; anything else is retried.
func (c *Controller) submit(ctx context.Context, snap decision.Snapshot, plan *decision.Plan) (refused string, retry error) {
	a, sub := snap.Agent, plan.Submit
	if c.opts.Batch == nil {
		return decision.ReasonBatchDisabled, nil
	}
	ctx, cancel := context.WithTimeout(ctx, batchCallTimeout)
	defer cancel()
	resp, err := c.opts.Batch.Submit(ctx, &batchpb.SubmitRequest{
		Run:   &batchpb.Run{Namespace: a.Namespace, Agent: a.Name, Uid: string(a.UID), ApiKeyKey: sub.APIKeyKey},
		Model: sub.Model, Prompt: sub.Prompt, MaxTokens: sub.MaxTokens, OutputSchema: sub.OutputSchema,
	})
	if err != nil {
		if st := status.Convert(err); decision.SubmitPermanent(st.Code(), st.Message()) {
			return "batch submit refused: " + st.Message(), nil
		}
		return "", fmt.Errorf("submit batch: %w", err)
	}
	plan.Status.BatchID = resp.GetBatchId()
	return "", nil
}

// askBatch fills snap.Batch when a pass over a Running batch run is due to
// ask batch-poller (see decision.BatchDue).
func (c *Controller) askBatch(ctx context.Context, snap *decision.Snapshot) error {
	a := snap.Agent
	now := c.opts.Now()
	deadline := decision.BatchDeadline(a, snap.Definition, c.opts.Reconcile.BatchTimeoutUnit)
	key := string(a.UID)
	last, _ := c.batchAsked.Load(key)
	lastAt, _ := last.(time.Time)
	_, noticed := c.batchNoticed.LoadAndDelete(key)
	if !decision.BatchDue(lastAt, now, deadline, c.opts.Reconcile.BatchPoll, noticed) {
		return nil
	}
	if c.opts.Batch == nil {
		return errors.New("batch run is Running but this controller has no batch-poller client (BATCH_ENABLED is off)")
	}
	ctx, cancel := context.WithTimeout(ctx, batchCallTimeout)
	defer cancel()
	resp, err := c.opts.Batch.Get(ctx, &batchpb.GetRequest{Batch: batchRef(a, snap.Definition, a.EffectiveModel(snap.Definition))})
	if err != nil {
		if now.Before(deadline) {
			return fmt.Errorf("get batch %s: %w", a.Status.BatchID, err)
		}
		// The run's time is up whatever the query says (the batch gone at
		// the provider, its key removed): decide with no answer, so the
		// timeout and onTimeout apply instead of a retry loop forever.
		c.log.Warn("the batch's status cannot be read past its deadline; applying the timeout",
			"agent", a.Namespace+"/"+a.Name, "batch", a.Status.BatchID, "err", err)
		snap.Batch = &decision.BatchOutcome{State: decision.BatchPending}
		return nil
	}
	c.batchAsked.Store(key, now)
	out := &decision.BatchOutcome{Lines: resp.GetLines(), FailureMessage: resp.GetFailureMessage()}
	switch resp.GetState() {
	case batchpb.State_STATE_SUCCEEDED:
		out.State = decision.BatchSucceeded
	case batchpb.State_STATE_FAILED:
		out.State = decision.BatchFailed
	default:
		out.State = decision.BatchPending
	}
	snap.Batch = out
	return nil
}

// noticeBatch is called for every completion notice from batch-poller: it
// marks the run due and reconciles it at once. A notice for an Agent the
// cache does not hold (another namespace, one already gone) has nothing to
// wake and leaves no mark behind, so batchNoticed only ever holds cached
// Agents, and the poll's forgetGone bounds it.
func (c *Controller) noticeBatch(ev *eventsv1.RunEvent) {
	run := ev.GetRun()
	key := run.GetNamespace() + "/" + run.GetAgent()
	obj, ok, _ := c.agents.GetIndexer().GetByKey(key)
	a, isAgent := obj.(*agentsv1alpha1.Agent)
	if run.GetNamespace() == "" || run.GetAgent() == "" || !ok || !isAgent {
		return
	}
	if uid := run.GetUid(); uid != "" && uid == string(a.UID) {
		c.batchNoticed.Store(uid, true)
	}
	c.queue.Add(key)
}

// ensureFinalizer adds the batch-cleanup finalizer to a submitted batch run
// that lacks it: normally right after the submit patch, and again by any
// later pass if a crash came in between.
func (c *Controller) ensureFinalizer(ctx context.Context, a *agentsv1alpha1.Agent) error {
	patch := addFinalizerPatch(a)
	if patch == nil {
		return nil
	}
	obj := &agentsv1alpha1.Agent{}
	obj.Namespace, obj.Name = a.Namespace, a.Name
	if err := c.c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("add finalizer %s: %w", agentsv1alpha1.BatchCleanupFinalizer, err)
	}
	c.storeIfNewer(obj)
	return nil
}

// cleanupBatch deletes a's batch at the provider (cancelling it first when
// it may still be in flight) and then removes the finalizer. A failed
// attempt is counted in status.batchCleanupAttempts and in
// controller_batch_cleanup_failures_total and retried after a backoff;
// after MaxBatchCleanupAttempts the finalizer is removed anyway.
func (c *Controller) cleanupBatch(ctx context.Context, key string, a *agentsv1alpha1.Agent) (string, error) {
	uid := string(a.UID)
	if v, ok := c.cleanupAt.Load(uid); ok {
		// The attempt counter's own status patch brings the Agent straight
		// back; the retry still waits out its backoff.
		if wait := v.(time.Time).Sub(c.opts.Now()); wait > 0 {
			c.queue.AddAfter(key, wait)
			return resultOK, nil
		}
	}
	err := c.deleteAtProvider(ctx, a)
	if err == nil {
		return c.removeFinalizer(ctx, a)
	}
	c.m.BatchCleanupFail.Inc()
	next, giveUp := decision.CleanupFailed(a.Status.BatchCleanupAttempts)
	c.log.Warn("batch cleanup at the provider failed", "agent", key, "batch", a.Status.BatchID,
		"provider", a.Status.BatchProvider, "attempt", next, "giveUp", giveUp, "err", err)
	patched := a.DeepCopy()
	patched.Status.BatchCleanupAttempts = next
	perr := c.c.Status().Patch(ctx, patched, client.MergeFromWithOptions(a, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(perr):
		// Someone else moved the Agent: this attempt is still counted in
		// the metric, and the fresh state is retried.
		return resultConflict, nil
	case apierrors.IsNotFound(perr):
		return resultOK, nil
	case perr != nil:
		return resultError, fmt.Errorf("record cleanup attempt: %w", perr)
	}
	c.storeIfNewer(patched)
	c.record(decision.AgentRef(patched), decision.CleanupEvent(patched, next, giveUp, err.Error()))
	if giveUp {
		c.m.BatchCleanupGivenUp.Inc()
		c.log.Warn("giving up batch cleanup; the provider object is left behind", "agent", key,
			"batch", a.Status.BatchID, "provider", a.Status.BatchProvider, "attempts", next)
		return c.removeFinalizer(ctx, patched)
	}
	wait := c.cleanupBackoff(next)
	c.cleanupAt.Store(uid, c.opts.Now().Add(wait))
	c.queue.AddAfter(key, wait)
	return resultOK, nil
}

// maxCleanupBackoff caps the wait between batch cleanup attempts: the
// finalizer holds the Agent's deletion meanwhile.
const maxCleanupBackoff = time.Minute

// cleanupBackoff is the wait after the given number of failed attempts.
func (c *Controller) cleanupBackoff(attempts int32) time.Duration {
	return cleanupDelay(c.opts.BatchCleanupBackoff, attempts)
}

// cleanupDelay doubles from base per failed attempt, capped at
// maxCleanupBackoff. The attempt count lives in the Agent's status, not
// in a goroutine, so the schedule is stepped through from its start;
// wait.Backoff caps only the waits it grew, so base is capped here.
func cleanupDelay(base time.Duration, attempts int32) time.Duration {
	b := wait.Backoff{Duration: min(base, maxCleanupBackoff), Factor: 2, Steps: math.MaxInt, Cap: maxCleanupBackoff}
	d := b.Step()
	for n := int32(1); n < attempts; n++ {
		if b.Steps == 0 {
			// Capped: every later wait is the cap, however large a count
			// the status holds.
			return b.Duration
		}
		d = b.Step()
	}
	return d
}

func (c *Controller) deleteAtProvider(ctx context.Context, a *agentsv1alpha1.Agent) error {
	if a.Status.BatchID == "" {
		return nil
	}
	if c.opts.Batch == nil {
		return errors.New("no batch-poller client (BATCH_ENABLED is off)")
	}
	// The recipe names the API key and the model; when it is gone the
	// defaults apply.
	snap := decision.Snapshot{Agent: a}
	_ = c.readRefs(ctx, &snap)
	ref := batchRef(a, snap.Definition, a.EffectiveModel(snap.Definition))
	ctx, cancel := context.WithTimeout(ctx, batchCallTimeout)
	defer cancel()
	inFlight := a.Status.Phase == agentsv1alpha1.PhaseRunning && !a.Status.BatchFallback
	timedOut := a.Status.BatchFallback || a.Status.FailureReason == decision.ReasonBatchTimedOut
	if inFlight || timedOut {
		if _, err := c.opts.Batch.Cancel(ctx, &batchpb.CancelRequest{Batch: ref}); err != nil && status.Code(err) != codes.NotFound {
			return fmt.Errorf("cancel batch %s: %w", a.Status.BatchID, err)
		}
	}
	if _, err := c.opts.Batch.Delete(ctx, &batchpb.DeleteRequest{Batch: ref}); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("delete batch %s: %w", a.Status.BatchID, err)
	}
	return nil
}

func (c *Controller) removeFinalizer(ctx context.Context, a *agentsv1alpha1.Agent) (string, error) {
	patch := removeFinalizerPatch(a)
	if patch == nil {
		return resultOK, nil
	}
	obj := &agentsv1alpha1.Agent{}
	obj.Namespace, obj.Name = a.Namespace, a.Name
	err := c.c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch))
	switch {
	case apierrors.IsNotFound(err):
		return resultOK, nil
	case apierrors.IsInvalid(err), apierrors.IsConflict(err), isFailedTest(err):
		// The list changed under us; the watch brings the new one.
		return resultConflict, nil
	case err != nil:
		return resultError, fmt.Errorf("remove finalizer %s: %w", agentsv1alpha1.BatchCleanupFinalizer, err)
	}
	c.batchAsked.Delete(string(a.UID))
	c.cleanupAt.Delete(string(a.UID))
	if obj.DeletionTimestamp == nil || len(obj.Finalizers) > 0 {
		c.storeIfNewer(obj)
	}
	return resultOK, nil
}

// isFailedTest reports a JSON patch whose test operation failed, which the
// API server answers with 422.
func isFailedTest(err error) bool {
	var se apierrors.APIStatus
	return errors.As(err, &se) && se.Status().Code == 422
}
