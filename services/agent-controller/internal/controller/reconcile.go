package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
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

// logTailLines bounds how much of the pod log is fetched before capping.
const logTailLines = 10000

// The init container's log is short (a line per step, event and warning);
// its tail holds the conversation step and the init's end. LimitBytes
// counts from the first line of that tail, so it is far above what the
// tail holds: a cut would drop the end, which is the part read.
const (
	initLogTailLines  = 200
	initLogLimitBytes = 1 << 20
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
}

// fillSlots fills snap's StationRuns, PendingWithJob and InFlight for the
// Station namespace/station (stationKey), leaving snap.Agent's own
// admission out of InFlight (none when snap.Agent is nil).
func (c *Controller) fillSlots(snap *decision.Snapshot, namespace, station, stationKey string) {
	snap.StationRuns = c.cachedRuns(namespace, station)
	for _, r := range snap.StationRuns {
		if r.Status.Phase != "" && r.Status.Phase != agentsv1alpha1.PhasePending || r.DeletionTimestamp != nil {
			continue
		}
		obj, ok, _ := c.jobs.GetIndexer().GetByKey(r.Namespace + "/" + jobbuild.JobName(r.Name))
		job, isJob := obj.(*batchv1.Job)
		// Owned by this Agent, not by an earlier one of the same name.
		if !ok || !isJob || !metav1.IsControlledBy(job, r) {
			continue
		}
		if snap.PendingWithJob == nil {
			snap.PendingWithJob = map[string]bool{}
		}
		snap.PendingWithJob[r.Name] = true
		c.inflight.forget(r.Namespace + "/" + r.Name)
	}
	exclude := ""
	if snap.Agent != nil {
		exclude = snap.Agent.Name
	}
	snap.InFlight = c.inflight.count(stationKey, exclude, snap.StationRuns)
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

// readRun fills the Job and, once it finished, the pod outcome; while it
// runs, only the init log's restore outcome when ReadsInitLog asks for it.
// Reading the pod back is best-effort: any failure there still lets the
// run end.
func (c *Controller) readRun(ctx context.Context, snap *decision.Snapshot) error {
	a := snap.Agent
	name := decision.JobNameOf(a)
	if obj, ok, _ := c.jobs.GetIndexer().GetByKey(a.Namespace + "/" + name); ok {
		// The watched Job is enough while it runs; its finish arrives as an
		// event. Only a Job missing from the cache is confirmed live, so a
		// lagging cache is never mistaken for a garbage-collected Job.
		if cached, ok := obj.(*batchv1.Job); ok && !decision.JobFinished(cached) {
			snap.Job = cached
			if decision.ReadsInitLog(a, cached) {
				pod, err := c.readPod(ctx, cached, false, true)
				if err != nil {
					return err
				}
				snap.Pod = pod
			}
			return nil
		}
	}
	job, err := c.kube.BatchV1().Jobs(a.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get Job %s: %w", name, err)
	}
	snap.Job = job
	finished, initLog := decision.JobFinished(job), decision.ReadsInitLog(a, job)
	if finished || initLog {
		pod, err := c.readPod(ctx, job, finished, initLog)
		if err != nil {
			return err
		}
		snap.Pod = pod
	}
	return nil
}

// readPod reads the Job's pod back: its agent container's exit code and
// log when agentLog is set (the run finished), and the init container's
// log, for the conversation restore's outcome, when initLog is set. In a
// finished run whose init container failed, that log is read for the
// failed step instead of the agent container's, which never ran. A failed
// pod LIST is an error to retry: only a pod that is really gone makes the
// run lose its output.
func (c *Controller) readPod(ctx context.Context, job *batchv1.Job, agentLog, initLog bool) (decision.PodOutcome, error) {
	pods, err := c.kube.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job.Name})
	if err != nil {
		return decision.PodOutcome{}, fmt.Errorf("list the pods of Job %s: %w", job.Name, err)
	}
	if len(pods.Items) == 0 {
		return decision.PodOutcome{}, nil
	}
	// With backoffLimit 0 there is one pod; take the newest if not.
	sort.Slice(pods.Items, func(i, j int) bool {
		return pods.Items[j].CreationTimestamp.Before(&pods.Items[i].CreationTimestamp)
	})
	pod := &pods.Items[0]
	out := decision.PodOutcome{Found: true}
	if agentLog {
		out.InitFailed = failedInit(pod)
		out.Summary = c.runSummary(pod)
	}
	// Only the supervisor's init container prints lifecycle lines.
	failedStep := out.InitFailed != nil && out.InitFailed.Container == jobbuild.InitContainerName
	if initLog || failedStep {
		// Best-effort: an unread log sets no restore condition (the next
		// pass tries again), and a failed init is named from its status.
		raw, err := c.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
			Container: jobbuild.InitContainerName, TailLines: ptr.To[int64](initLogTailLines), LimitBytes: ptr.To[int64](initLogLimitBytes),
		}).DoRaw(ctx)
		switch {
		case err != nil:
			c.log.Debug("init container log not read", "pod", pod.Namespace+"/"+pod.Name, "err", err)
			if failedStep {
				out.InitFailed.LogErr = err
			}
		default:
			if initLog {
				out.Restore = decision.ParseRestore(string(raw))
			}
			if failedStep {
				out.InitFailed.Step, out.InitFailed.Message, _ = decision.ParseInitFailure(string(raw))
			}
		}
	}
	if !agentLog || out.InitFailed != nil {
		// A pod whose init failed never started its agent container: it
		// has no exit code, and reading its log would only fail.
		return out, nil
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == agentsv1alpha1.AgentContainerName && cs.State.Terminated != nil {
			out.ExitCode = ptr.To(cs.State.Terminated.ExitCode)
		}
	}
	// Streamed and cut to what status.output keeps, so a pod that printed
	// gigabytes costs the controller no more memory than a quiet one.
	stream, err := c.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
		Container: agentsv1alpha1.AgentContainerName, TailLines: ptr.To[int64](logTailLines),
	}).Stream(ctx)
	if err != nil {
		out.LogErr = errors.New("reading the agent container log failed: " + err.Error())
		return out, nil
	}
	defer func() { _ = stream.Close() }()
	tail, err := decision.ReadTail(stream, c.opts.Reconcile.MaxOutputBytes)
	if err != nil {
		out.LogErr = errors.New("reading the agent container log failed: " + err.Error())
		return out, nil
	}
	out.Log, out.LogDropped = tail.Text, tail.Dropped
	return out, nil
}

// runSummary adds up the delivery summaries the supervisor left in the
// termination messages of pod's init and agent containers (runspec.Summary):
// a run pod ends before anything scrapes it, so its figures are counted
// from here. A message is the pod's to write, so one that is not a summary
// is ignored; nil when no container left one.
func (c *Controller) runSummary(pod *corev1.Pod) *runspec.Summary {
	var sum *runspec.Summary
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			t := cs.State.Terminated
			if cs.Name != jobbuild.InitContainerName && cs.Name != agentsv1alpha1.AgentContainerName || t == nil || t.Message == "" {
				continue
			}
			s, err := runspec.ParseSummary(t.Message)
			if err != nil {
				c.log.Debug("termination message is not a run summary; ignored", "pod", pod.Namespace+"/"+pod.Name, "container", cs.Name, "err", err)
				continue
			}
			if sum != nil {
				s = sum.Add(s)
			}
			sum = &s
		}
	}
	return sum
}

// failedInit returns the first init container of pod that terminated
// with a non-zero exit code; nil when none did.
func failedInit(pod *corev1.Pod) *decision.InitFailure {
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return &decision.InitFailure{Container: cs.Name, ExitCode: t.ExitCode, Reason: t.Reason}
		}
	}
	return nil
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
		refused, retry := c.ensureRunToken(ctx, agent)
		switch {
		case retry != nil:
			return nil, resultError, retry
		case refused != "":
			return func(s decision.Snapshot) decision.Plan { return decision.TokenRefused(s, refused) }, "", nil
		}
	}
	if plan.CreateJob != nil {
		_, err := c.kube.BatchV1().Jobs(agent.Namespace).Create(ctx, plan.CreateJob, metav1.CreateOptions{})
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
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
	if plan.Outcome.Terminal != "" {
		// A slot may have freed: let the Station's queued runs try now
		// rather than at the next poll.
		for _, r := range c.cachedRuns(agent.Namespace, agent.Spec.StationRef) {
			waitsForSlot := r.Status.Phase != agentsv1alpha1.PhaseRunning || r.Status.BatchFallback && r.Status.JobName == ""
			if r.Name != agent.Name && !r.Status.Phase.IsTerminal() && waitsForSlot {
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

// prune deletes the Station's finished Agents beyond its history limits.
func (c *Controller) prune(ctx context.Context, agent *agentsv1alpha1.Agent, station *agentsv1alpha1.Station) error {
	if station == nil {
		station = &agentsv1alpha1.Station{}
		err := c.getDecoded(ctx, types.NamespacedName{Namespace: agent.Namespace, Name: agent.Spec.StationRef}, station)
		if _, bad := unreadable(err); bad || apierrors.IsNotFound(err) {
			// An unreadable Station's limits are unknown: nothing is
			// pruned until it is fixed (its watch reports it).
			return nil
		}
		if err != nil {
			return fmt.Errorf("get Station: %w", err)
		}
	}
	var errs []error
	for _, v := range decision.PruneVictims(station, c.cachedRuns(agent.Namespace, agent.Spec.StationRef)) {
		victim := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: agent.Namespace, Name: v.Name}}
		err := c.c.Delete(ctx, victim, client.Preconditions{ResourceVersion: ptr.To(v.ResourceVersion)}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete Agent %s: %w", v.Name, err))
		}
	}
	return errors.Join(errs...)
}
