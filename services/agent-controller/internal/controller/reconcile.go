package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// Reconcile results, the label of controller_reconciles_total.
const (
	resultOK       = metrics.ResultOK
	resultConflict = metrics.ResultConflict
	resultError    = metrics.ResultError
)

// reconcileKey reconciles one Agent from the cache.
func (c *Controller) reconcileKey(ctx context.Context, key string) (string, error) {
	obj, exists, err := c.agents.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return resultOK, nil
	}
	cached, ok := obj.(*agentsv1alpha1.Agent)
	if !ok {
		return resultOK, nil
	}
	if decision.NeedsBatchCleanup(cached) {
		// Recorded, timed out or being deleted: the provider's batch goes
		// first, then the finalizer.
		return c.cleanupBatch(ctx, key, cached.DeepCopy())
	}
	if cached.Status.Phase.IsTerminal() || cached.DeletionTimestamp != nil {
		// Terminal → terminal is a no-op: no I/O at all.
		return resultOK, nil
	}
	agent := cached.DeepCopy()
	snap := decision.Snapshot{Agent: agent, Config: c.opts.Reconcile}

	stationKey := agent.Namespace + "/" + agent.Spec.StationRef
	switch {
	case decision.IsBatchRun(agent):
		if err := c.ensureFinalizer(ctx, agent); err != nil {
			return resultError, err
		}
		if err := c.readRefs(ctx, &snap); err != nil {
			return resultError, err
		}
		if err := c.askBatch(ctx, &snap); err != nil {
			return resultError, err
		}
		// A timeout may fall back to a Job: that admission reads the
		// Station's runs like any other.
		defer c.lockAdmission(snap.Station, stationKey)()
		c.readSlots(&snap, stationKey)
	case decision.NeedsJob(agent):
		if err := c.readRun(ctx, &snap); err != nil {
			return resultError, err
		}
	default:
		// Pending, or a batch fallback waiting for a slot: admission.
		if err := c.readRefs(ctx, &snap); err != nil {
			if bad, ok := unreadable(err); ok && (agent.Status.Phase == "" || agent.Status.Phase == agentsv1alpha1.PhasePending) {
				// Retrying cannot help until someone fixes the object. A
				// started run (a batch fallback) keeps retrying instead.
				snap.Now = c.opts.Now()
				return c.apply(ctx, agent, snap, decision.RefUnreadable(snap, bad.Kind, bad.Error()))
			}
			return resultError, err
		}
		defer c.lockAdmission(snap.Station, stationKey)()
		c.readSlots(&snap, stationKey)
	}
	snap.Now = c.opts.Now()

	plan := decision.Decide(snap)
	if plan.RequeueAfter > 0 {
		c.queue.AddAfter(key, plan.RequeueAfter)
	}
	if plan.Empty() {
		return resultOK, nil
	}
	return c.apply(ctx, agent, snap, plan)
}

// readSlots fills what the Station's concurrency is counted from: its
// cached runs, those of them Pending whose Job the cache holds, and the
// runs this controller admitted that the cache does not show yet. A run
// found with its Job stops counting as in flight, so it is counted once.
func (c *Controller) readSlots(snap *decision.Snapshot, stationKey string) {
	c.fillSlots(snap, snap.Agent.Namespace, snap.Agent.Spec.StationRef, stationKey)
	c.readNameTaken(snap)
}

// readNameTaken fills snap.NameTaken from the watched Jobs: a Job of the
// run's name that the run does not control, which must never be adopted.
// A Job without the run pods' label is not watched; creating the run's Job
// finds it instead (apply).
func (c *Controller) readNameTaken(snap *decision.Snapshot) {
	a := snap.Agent
	obj, ok, _ := c.jobs.GetIndexer().GetByKey(a.Namespace + "/" + decision.JobNameOf(a))
	if job, isJob := obj.(*decision.RunJob); ok && isJob && !decision.IsRunJob(job, a) {
		snap.NameTaken = job
	}
}

// fillSlots fills snap's StationRuns, PendingWithJob and InFlight for the
// Station namespace/station (stationKey), leaving snap.Agent's own
// admission out of InFlight (none when snap.Agent is nil).
func (c *Controller) fillSlots(snap *decision.Snapshot, namespace, station, stationKey string) {
	if snap.Agent != nil && snap.Station != nil && snap.Station.Spec.EffectiveMaxConcurrent() <= 0 {
		// An unlimited Station admits every run: only whether this run's
		// own Job exists (a lost patch) matters. Counting the Station's
		// other runs would make a burst into one Station quadratic.
		c.notePendingWithJob(snap, snap.Agent)
		return
	}
	snap.StationRuns = c.cachedRuns(namespace, station)
	for _, r := range snap.StationRuns {
		c.notePendingWithJob(snap, r)
	}
	exclude := ""
	if snap.Agent != nil {
		exclude = snap.Agent.Name
	}
	snap.InFlight = c.inflight.count(stationKey, exclude, snap.StationRuns)
}

// notePendingWithJob marks r in snap.PendingWithJob when r is Pending and
// its Job exists, owned by r (not by an earlier Agent of the same name):
// the run holds its slot, so it stops counting as in flight.
func (c *Controller) notePendingWithJob(snap *decision.Snapshot, r *agentsv1alpha1.Agent) {
	if r.Status.Phase != "" && r.Status.Phase != agentsv1alpha1.PhasePending || r.DeletionTimestamp != nil {
		return
	}
	obj, ok, _ := c.jobs.GetIndexer().GetByKey(r.Namespace + "/" + jobbuild.JobName(r.Name))
	job, isJob := obj.(*decision.RunJob)
	if !ok || !isJob || !metav1.IsControlledBy(job, r) {
		return
	}
	if snap.PendingWithJob == nil {
		snap.PendingWithJob = map[string]bool{}
	}
	snap.PendingWithJob[r.Name] = true
	c.inflight.forget(r.Namespace + "/" + r.Name)
}

// readRefs fills the Station and AgentDefinition; a missing one stays nil.
// The watched caches answer first; a miss is confirmed with a live read, so
// an object created a moment ago is never taken for a missing reference.
func (c *Controller) readRefs(ctx context.Context, snap *decision.Snapshot) error {
	a := snap.Agent
	st := &agentsv1alpha1.Station{}
	found, err := c.cachedOrLive(ctx, c.stations, a.Namespace, a.Spec.StationRef, st)
	if err != nil || !found {
		return err
	}
	snap.Station = st
	def := &agentsv1alpha1.AgentDefinition{}
	found, err = c.cachedOrLive(ctx, c.defs, a.Namespace, st.Spec.AgentDefRef, def)
	if err != nil || !found {
		return err
	}
	snap.Definition = def
	return nil
}

// cachedOrLive reads namespace/name into obj from inf's cache, else from the
// API server. It reports whether the object exists.
func (c *Controller) cachedOrLive(ctx context.Context, inf cache.SharedIndexInformer, namespace, name string, obj client.Object) (bool, error) {
	if cached, ok, _ := inf.GetIndexer().GetByKey(namespace + "/" + name); ok {
		if src, ok := cached.(client.Object); ok && reflect.TypeOf(src) == reflect.TypeOf(obj) {
			// Copy: cached objects are shared and must never be mutated.
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(src.DeepCopyObject()).Elem())
			return true, nil
		}
	}
	err := c.getDecoded(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get %T %s: %w", obj, name, err)
	}
	return true, nil
}

// showRetrying records on a Pending Agent that starting it failed for now
// and is retried (decision.Retrying); best-effort, as the retry is what
// matters.
func (c *Controller) showRetrying(ctx context.Context, agent *agentsv1alpha1.Agent, snap decision.Snapshot, what string, cause error) {
	snap.Now = c.opts.Now()
	st := decision.Retrying(snap, what, cause)
	if st == nil {
		return
	}
	patched := agent.DeepCopy()
	patched.Status = *st
	if err := c.c.Status().Patch(ctx, patched, client.MergeFromWithOptions(agent, client.MergeFromWithOptimisticLock{})); err != nil {
		c.log.Debug("could not show the retry on the Agent", "agent", agent.Namespace+"/"+agent.Name, "err", err)
		return
	}
	c.storeIfNewer(patched)
}

// maxReplans bounds apply's loop. A refused step (a batch submit or run
// token the provider refuses, a Job create the cluster denies) turns the
// plan into one that fails the run with the reason, and such a plan has no
// step that can be refused; the bound only guards a future rule that would.
const maxReplans = 3

// apply makes the plan's writes in order. A 409 on the status patch means
// the write was computed from a stale read: it is dropped, and the watch
// event of the newer version brings the Agent back with fresh state. When a
// step is refused for good, the plan is decided again from the refusal, at
// the current time, and applied instead.
func (c *Controller) apply(ctx context.Context, agent *agentsv1alpha1.Agent, snap decision.Snapshot, plan decision.Plan) (string, error) {
	for range maxReplans {
		replan, result, err := c.applyOnce(ctx, agent, snap, plan)
		if replan == nil {
			return result, err
		}
		snap.Now = c.opts.Now()
		plan = replan(snap)
		if plan.RequeueAfter > 0 {
			// A replan may wait too (for a predecessor's Job to go).
			c.queue.AddAfter(agent.Namespace+"/"+agent.Name, plan.RequeueAfter)
		}
	}
	return resultError, fmt.Errorf("the plan for Agent %s was refused %d times in a row", agent.Name, maxReplans)
}

// applyOnce makes the plan's writes in order. It stops at the first step
// refused for good and returns how to decide the plan that records the
// refusal; otherwise replan is nil and result says how the pass ended.
func (c *Controller) applyOnce(ctx context.Context, agent *agentsv1alpha1.Agent, snap decision.Snapshot, plan decision.Plan) (replan func(decision.Snapshot) decision.Plan, result string, err error) {
	for _, v := range plan.Preempt {
		victim := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: agent.Namespace, Name: v.Name}}
		err := c.c.Delete(ctx, victim, client.Preconditions{ResourceVersion: ptr.To(v.ResourceVersion)}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		switch {
		case apierrors.IsConflict(err):
			return nil, resultConflict, nil
		case apierrors.IsNotFound(err):
			// Gone already: whoever deleted it tells its story.
			continue
		case err != nil:
			return nil, resultError, fmt.Errorf("preempt Agent %s: %w", v.Name, err)
		}
		c.log.Info("preempted the oldest running run (concurrencyPolicy Replace)", "agent", v.Name, "for", agent.Name, "station", agent.Spec.StationRef)
		victim.UID = v.UID
		c.record(decision.AgentRef(victim), v.Event)
	}
	if plan.Submit != nil {
		refused, retry := c.submit(ctx, snap, &plan)
		switch {
		case retry != nil:
			c.showRetrying(ctx, agent, snap, "submitting the batch", retry)
			return nil, resultError, retry
		case refused != "":
			return func(s decision.Snapshot) decision.Plan { return decision.SubmitRefused(s, refused) }, "", nil
		}
	}
	if plan.RunToken {
		replan, retry := c.ensureRunToken(ctx, agent)
		switch {
		case retry != nil:
			c.showRetrying(ctx, agent, snap, "writing the run's token Secret", retry)
			return nil, resultError, retry
		case replan != nil:
			return replan, "", nil
		}
	}
	if plan.RunCredentials {
		replan, retry := c.ensureRunCredentials(ctx, agent, plan.CreateJob)
		switch {
		case retry != nil:
			c.showRetrying(ctx, agent, snap, "writing the run's NATS credential Secret", retry)
			return nil, resultError, retry
		case replan != nil:
			return replan, "", nil
		}
	}
	if plan.CreateJob != nil {
		if err := c.ensureRunPolicy(ctx, agent, plan.CreateJob); err != nil {
			c.showRetrying(ctx, agent, snap, "writing the run's NetworkPolicy", err)
			return nil, resultError, err
		}
		// Held until this pass ends: by then the status it wrote is in the
		// cache (storeIfNewer), or the pass failed and is retried.
		jobKey := agent.Namespace + "/" + plan.CreateJob.Name
		c.creating.Store(jobKey, struct{}{})
		defer c.creating.Delete(jobKey)
		err := c.createJob(ctx, agent.Namespace, plan.CreateJob)
		if apierrors.IsAlreadyExists(err) {
			// Ours from an earlier pass whose status write was lost, or
			// someone else's, which must never carry the run.
			existing, ours, rerr := c.existingJob(ctx, agent, plan.CreateJob.Name)
			switch {
			case rerr != nil:
				return nil, resultError, rerr
			case !ours:
				return func(s decision.Snapshot) decision.Plan { return decision.JobNameTaken(s, existing) }, "", nil
			}
			err = nil
		}
		switch {
		case err == nil:
		case decision.JobCreatePermanent(err):
			return func(s decision.Snapshot) decision.Plan { return decision.JobDenied(s, err) }, "", nil
		default:
			err = fmt.Errorf("create Job %s: %w", plan.CreateJob.Name, err)
			c.showRetrying(ctx, agent, snap, "creating the Job", err)
			return nil, resultError, err
		}
	}
	if plan.CreateJob != nil || plan.Submit != nil {
		// The run holds its slot from here, whether or not the status patch
		// below lands: a Job created before a lost patch runs all the same.
		c.inflight.add(agent.Namespace+"/"+agent.Spec.StationRef, agent.Name)
	}
	if plan.Status != nil {
		patched := agent.DeepCopy()
		patched.Status = *plan.Status
		err := c.c.Status().Patch(ctx, patched, client.MergeFromWithOptions(agent, client.MergeFromWithOptimisticLock{}))
		switch {
		case apierrors.IsConflict(err):
			c.log.Debug("status write was stale; dropped", "agent", agent.Name)
			return nil, resultConflict, nil
		case apierrors.IsNotFound(err):
			return nil, resultOK, nil
		case err != nil:
			return nil, resultError, fmt.Errorf("patch status of Agent %s: %w", agent.Name, err)
		}
		c.storeIfNewer(patched)
		if plan.Submit != nil {
			if err := c.ensureFinalizer(ctx, patched); err != nil {
				// The next pass over the Running batch run adds it.
				c.log.Warn("batch submitted but its finalizer is not on yet", "agent", agent.Name, "err", err)
			}
		}
		var lines []string
		if snap.Batch != nil {
			lines = snap.Batch.Lines
		}
		c.notify(ctx, plan.Notice, patched, snap.Definition, lines)
		c.record(decision.AgentRef(patched), plan.Events...)
		c.log.Info("agent status", "agent", agent.Namespace+"/"+agent.Name, "phase", patched.Status.Phase,
			"job", patched.Status.JobName, "reason", patched.Status.FailureReason)
	}
	c.m.Observe(decision.RunOf(snap), plan.Outcome)
	if plan.Outcome.Terminal != "" && (snap.Station == nil || snap.Station.Spec.EffectiveMaxConcurrent() > 0) {
		// A slot may have freed: let the Station's queued runs try now
		// rather than at the next poll. An unlimited Station queues none.
		for _, r := range c.indexed(byStationWaiting, agent.Namespace+"/"+agent.Spec.StationRef) {
			if r.Name != agent.Name {
				c.queue.Add(r.Namespace + "/" + r.Name)
			}
		}
	}
	if plan.Prune {
		if err := c.prune(ctx, agent, snap.Station); err != nil {
			// The run's own result is recorded; pruning is retried on the
			// next terminal transition of this Station.
			c.log.Warn("history pruning failed", "station", agent.Spec.StationRef, "err", err)
		}
	}
	return nil, resultOK, nil
}

// existingJob reads the Job that a create found already there, as the
// cache holds Jobs (decision.RunJob), and whether it is the Agent's own
// (a pass whose status write was lost created it). A Job gone meanwhile
// is an error, so the pass is retried and creates it.
func (c *Controller) existingJob(ctx context.Context, a *agentsv1alpha1.Agent, name string) (job *decision.RunJob, ours bool, err error) {
	live, err := c.kube.BatchV1().Jobs(a.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("read Job %s, which already exists: %w", name, err)
	}
	job = decision.RunJobOf(live)
	return job, decision.IsRunJob(job, a), nil
}

// prune deletes the Station's finished Agents beyond its history limits.
func (c *Controller) prune(ctx context.Context, agent *agentsv1alpha1.Agent, station *agentsv1alpha1.Station) error {
	if station == nil {
		// A pass that followed a Job read no Station: the cache has it.
		station = &agentsv1alpha1.Station{}
		found, err := c.cachedOrLive(ctx, c.stations, agent.Namespace, agent.Spec.StationRef, station)
		if _, bad := unreadable(err); bad || err == nil && !found {
			// An unreadable Station's limits are unknown: nothing is
			// pruned until it is fixed (its watch reports it).
			return nil
		}
		if err != nil {
			return err
		}
	}
	var errs []error
	history := c.indexed(byStationFinished, finishedKey(agent.Namespace, agent.Spec.StationRef, agentsv1alpha1.PhaseSucceeded))
	history = append(history, c.indexed(byStationFinished, finishedKey(agent.Namespace, agent.Spec.StationRef, agentsv1alpha1.PhaseFailed))...)
	for _, v := range decision.PruneVictims(station, history) {
		victim := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: agent.Namespace, Name: v.Name}}
		err := c.c.Delete(ctx, victim, client.Preconditions{ResourceVersion: ptr.To(v.ResourceVersion)}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete Agent %s: %w", v.Name, err))
		}
	}
	return errors.Join(errs...)
}

// createJob creates job in namespace. The Job the API server answers
// with is not decoded: the controller reads its Jobs from the watch, and
// decoding a whole Job (its pod template) was a tenth of the controller's
// CPU in a burst of starts (docs/benchmarks.md). An error reads as the
// clientset's.
func (c *Controller) createJob(ctx context.Context, namespace string, job *batchv1.Job) error {
	return c.kube.BatchV1().RESTClient().Post().Namespace(namespace).Resource("jobs").
		Body(job).Do(ctx).Error()
}
