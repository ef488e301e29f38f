package reconcile

import (
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/vendors"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// Decide returns the writes that move s.Agent one step along its lifecycle.
func Decide(s Snapshot) Plan {
	switch s.Agent.Status.Phase {
	case agentsv1alpha1.PhaseSucceeded, agentsv1alpha1.PhaseFailed:
		// Terminal → terminal is a no-op.
		return Plan{}
	case agentsv1alpha1.PhaseRunning:
		return decideRunning(s)
	default:
		return decidePending(s)
	}
}

// NeedsJob reports whether a reconcile of a in this phase reads its Job:
// a Running run tracked through its Job (not its batch, and not a
// fallback still waiting for a Station slot).
func NeedsJob(a *agentsv1alpha1.Agent) bool {
	return a.Status.Phase == agentsv1alpha1.PhaseRunning && !IsBatchRun(a) &&
		(!a.Status.BatchFallback || a.Status.JobName != "")
}

// JobFinished reports whether job reached Complete or Failed, the point at
// which the controller reads the pod back.
func JobFinished(job *batchv1.Job) bool {
	done, _, _ := jobOutcome(job)
	return done
}

// JobNameOf is the Agent's Job name: status.jobName, or the derived name
// when a crash between creating the Job and patching the status lost it.
func JobNameOf(a *agentsv1alpha1.Agent) string {
	if a.Status.JobName != "" {
		return a.Status.JobName
	}
	return jobbuild.JobName(a.Name)
}

func decidePending(s Snapshot) Plan {
	a := s.Agent
	if s.Station == nil {
		return fail(s, fmt.Sprintf("Station %q not found", a.Spec.StationRef), FailureMissingRef, agentsv1alpha1.ReasonStationNotFound)
	}
	if s.Definition == nil {
		return fail(s, fmt.Sprintf("AgentDefinition %q (spec.agentDefRef of Station %q) not found", s.Station.Spec.AgentDefRef, s.Station.Name),
			FailureMissingRef, agentsv1alpha1.ReasonAgentDefinitionNotFound)
	}
	def := &s.Definition.Spec
	execution := def.EffectiveExecution()
	if reason := validateExecution(s, execution); reason != "" {
		cond := agentsv1alpha1.ReasonInvalidDefinition
		if reason == ReasonBatchDisabled || reason == ReasonRealtimeDisabled {
			cond = agentsv1alpha1.ReasonExecutionDisabled
		}
		return fail(s, reason, FailureInvalidSpec, cond)
	}

	plan := Plan{}
	limit := s.Station.Spec.EffectiveMaxConcurrent()
	running := runningOf(s)
	// A run whose own Job exists was admitted already and lost the patch
	// to Running: it holds its slot, so it neither waits nor preempts, and
	// the patch is made again.
	held := s.PendingWithJob[a.Name] && execution != agentsv1alpha1.ExecutionBatch
	if !held && limit > 0 && len(running)+s.InFlight >= limit {
		if s.Station.Spec.ConcurrencyPolicy != agentsv1alpha1.ReplaceConcurrent || len(running) == 0 {
			return queue(s)
		}
		// Replace: the oldest run holding a slot makes room for this one.
		sort.SliceStable(running, func(i, j int) bool { return startedBefore(running[i], running[j]) })
		over := len(running) + s.InFlight - limit + 1
		for i := 0; i < over && i < len(running); i++ {
			plan.Preempt = append(plan.Preempt, Victim{Name: running[i].Name, ResourceVersion: running[i].ResourceVersion})
		}
		plan.Outcome.Preempted = len(plan.Preempt)
		if len(running)-len(plan.Preempt)+s.InFlight >= limit {
			// Only admissions not yet visible hold the slots; wait for them.
			return queue(s)
		}
	}

	if execution == agentsv1alpha1.ExecutionBatch {
		return decideBatchSubmit(s, plan)
	}
	job, err := jobbuild.Build(jobbuild.Input{
		Agent: a, Station: s.Station, Definition: s.Definition,
		Model: a.EffectiveModel(s.Definition), Config: s.Config.Job,
	})
	if err != nil {
		return fail(s, err.Error(), FailureInvalidSpec, agentsv1alpha1.ReasonInvalidDefinition)
	}
	st := a.Status.DeepCopy()
	st.Phase = agentsv1alpha1.PhaseRunning
	st.JobName = job.Name
	st.StartedAt = &metav1.Time{Time: s.Now}
	st.ObservedGeneration = a.Generation
	setCondition(st, s, agentsv1alpha1.ConditionResolved, metav1.ConditionTrue, agentsv1alpha1.ReasonResolved, "Station and AgentDefinition found")
	setCondition(st, s, agentsv1alpha1.ConditionStarted, metav1.ConditionTrue, agentsv1alpha1.ReasonJobCreated, "Job "+job.Name+" created")
	plan.CreateJob = job
	plan.RunToken = execution == agentsv1alpha1.ExecutionRealtime
	plan.Status = st
	plan.Outcome.Started = true
	plan.Outcome.QueueWait = s.Now.Sub(a.CreationTimestamp.Time)
	return plan
}

// validateExecution returns why the definition cannot run on this
// controller, or "".
func validateExecution(s Snapshot, execution agentsv1alpha1.ExecutionMode) string {
	a, def := s.Agent, &s.Definition.Spec
	switch execution {
	case agentsv1alpha1.ExecutionBatch:
		if reason := ValidateBatch(def, a.EffectiveModel(s.Definition)); reason != "" {
			return reason
		}
		if !s.Config.BatchEnabled {
			return ReasonBatchDisabled
		}
	case agentsv1alpha1.ExecutionRealtime:
		if !s.Config.RealtimeEnabled {
			return ReasonRealtimeDisabled
		}
		if def.Resources != nil && def.Resources.Conversation != nil {
			if def.Resources.Conversation.ID != "" {
				return "realtime execution does not support resources.conversation.id; use the Agent's spec.resumeSession"
			}
			if def.Resources.Conversation.Pin != "" {
				return "realtime execution does not support resources.conversation.pin"
			}
		}
	}
	if a.Spec.ResumeSession != "" {
		if execution != agentsv1alpha1.ExecutionRealtime {
			return ReasonResumeNeedsRealtime
		}
		if def.Resources == nil || def.Resources.Conversation == nil || def.Resources.Conversation.Source == "" {
			return ReasonResumeNeedsSource
		}
		if err := vendors.CheckResume(vendors.Route(a.EffectiveModel(s.Definition))); err != nil {
			return err.Error()
		}
	}
	return ""
}

func queue(s Snapshot) Plan {
	c := meta.FindStatusCondition(s.Agent.Status.Conditions, agentsv1alpha1.ConditionStarted)
	if c != nil && c.Reason == agentsv1alpha1.ReasonQueued {
		return Plan{Outcome: Outcome{Queued: true}}
	}
	st := s.Agent.Status.DeepCopy()
	if st.Phase == "" {
		st.Phase = agentsv1alpha1.PhasePending
	}
	setCondition(st, s, agentsv1alpha1.ConditionResolved, metav1.ConditionTrue, agentsv1alpha1.ReasonResolved, "Station and AgentDefinition found")
	setCondition(st, s, agentsv1alpha1.ConditionStarted, metav1.ConditionFalse, agentsv1alpha1.ReasonQueued,
		fmt.Sprintf("waiting for a free slot of Station %s (concurrencyPolicy %s)", s.Station.Name, policyOf(s.Station)))
	return Plan{Status: st, Outcome: Outcome{Queued: true}}
}

func policyOf(st *agentsv1alpha1.Station) agentsv1alpha1.ConcurrencyPolicy {
	if st.Spec.ConcurrencyPolicy == "" {
		return agentsv1alpha1.AllowConcurrent
	}
	return st.Spec.ConcurrencyPolicy
}

// TokenRefused is the plan when a realtime run cannot get its token (the
// shared key is missing or unusable): it fails with the reason rather than
// waiting, so the misconfiguration is visible on the Agent.
func TokenRefused(s Snapshot, reason string) Plan {
	return fail(s, reason, FailureInvalidSpec, agentsv1alpha1.ReasonExecutionDisabled)
}

// fail moves a Pending Agent straight to Failed: it never ran, so it is
// counted but not timed.
func fail(s Snapshot, reason string, kind FailureKind, condReason string) Plan {
	st := s.Agent.Status.DeepCopy()
	st.Phase = agentsv1alpha1.PhaseFailed
	st.FailureReason = reason
	st.ExitCode = ptr.To[int32](1)
	st.CompletedAt = &metav1.Time{Time: s.Now}
	st.ObservedGeneration = s.Agent.Generation
	setCondition(st, s, agentsv1alpha1.ConditionResolved, metav1.ConditionFalse, condReason, reason)
	return Plan{Status: st, Prune: true, Outcome: Outcome{Terminal: agentsv1alpha1.PhaseFailed, ExitCode: 1, Failure: kind}}
}

func decideRunning(s Snapshot) Plan {
	a := s.Agent
	switch {
	case IsBatchRun(a):
		return decideBatchRunning(s)
	case a.Status.BatchFallback && a.Status.JobName == "":
		return decideFallbackWaiting(s)
	}
	st := a.Status.DeepCopy()
	st.JobName = JobNameOf(a)
	if s.Job == nil {
		return finish(s, st, agentsv1alpha1.PhaseFailed, 1, "", ReasonJobGarbageCollected, FailureOutputUnavailable)
	}
	done, succeeded, jobReason := jobOutcome(s.Job)
	if !done {
		// A long-running (realtime) run says early whether it continues its
		// conversation; this is its only write while it runs.
		if setRestoreCondition(st, s) {
			return Plan{Status: st}
		}
		return Plan{}
	}
	setRestoreCondition(st, s)
	output, reason := "", ""
	switch {
	case !s.Pod.Found:
		reason = ReasonPodGarbageCollected
	case s.Pod.LogErr != nil:
		reason = "run output unavailable: " + s.Pod.LogErr.Error()
	default:
		output = tailOutput(s.Pod.Log, s.Pod.LogDropped, s.Config.MaxOutputBytes)
		if id := realtimeSessionID(s.Job, s.Pod.Log); id != "" {
			st.SessionID = id
		}
	}
	if succeeded {
		kind := FailureKind("")
		if reason != "" {
			kind = FailureOutputUnavailable
		}
		return finish(s, st, agentsv1alpha1.PhaseSucceeded, 0, output, reason, kind)
	}
	// A Job-level reason (deadline, backoff) is the better explanation and
	// is kept even when the pod is gone.
	if jobReason != "" {
		reason = jobReason
	}
	exit := int32(1)
	if s.Pod.ExitCode != nil && *s.Pod.ExitCode != 0 {
		exit = *s.Pod.ExitCode
	}
	if exit == ExitDeadline && (jobReason == "" || strings.HasPrefix(jobReason, batchv1.JobReasonBackoffLimitExceeded)) {
		// The supervisor stops the CLI just before the Job's deadline, so
		// the Job only sees a failed pod; say what really happened. A
		// Job-level DeadlineExceeded is kept: it is the same story told by
		// Kubernetes.
		reason = ReasonDeadline
	}
	if reason == "" {
		// A Job marked Failed without a reason (another writer's): the
		// exit code is still a reason.
		reason = fmt.Sprintf("the run failed with exit code %d", exit)
	}
	return finish(s, st, agentsv1alpha1.PhaseFailed, exit, output, reason, FailureJobFailed)
}

func finish(s Snapshot, st *agentsv1alpha1.AgentStatus, phase agentsv1alpha1.AgentPhase, exit int32, output, reason string, kind FailureKind) Plan {
	st.Phase = phase
	st.ExitCode = ptr.To(exit)
	st.Output = output
	st.FailureReason = reason
	st.CompletedAt = &metav1.Time{Time: s.Now}
	st.ObservedGeneration = s.Agent.Generation
	var d time.Duration
	if st.StartedAt != nil {
		d = s.Now.Sub(st.StartedAt.Time)
	}
	return Plan{Status: st, Prune: true, Outcome: Outcome{Terminal: phase, ExitCode: exit, Duration: d, Failure: kind}}
}

// ExitDeadline is the supervisor's exit code for a run stopped at its deadline.
const ExitDeadline = 124

// jobOutcome reads a Job's terminal state from its conditions, falling back
// to its pod counters.
func jobOutcome(job *batchv1.Job) (done, succeeded bool, reason string) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, true, ""
		case batchv1.JobFailed:
			switch {
			case c.Reason != "" && c.Message != "":
				return true, false, c.Reason + ": " + c.Message
			case c.Reason != "":
				return true, false, c.Reason
			default:
				return true, false, c.Message
			}
		}
	}
	if job.Status.Active > 0 {
		return false, false, ""
	}
	if job.Status.Succeeded > 0 && job.Status.CompletionTime != nil {
		return true, true, ""
	}
	return false, false, ""
}

// runningOf returns the Station's other runs that hold a slot: the Running
// ones, and the Pending ones whose Job exists (created before a lost patch
// to Running: the Job runs, so not counting it would admit one over the
// limit). Runs being deleted are on their way out and hold none.
func runningOf(s Snapshot) []*agentsv1alpha1.Agent {
	var out []*agentsv1alpha1.Agent
	for _, r := range s.StationRuns {
		if r.Name == s.Agent.Name || r.DeletionTimestamp != nil {
			continue
		}
		switch r.Status.Phase {
		case agentsv1alpha1.PhaseRunning:
			out = append(out, r)
		case "", agentsv1alpha1.PhasePending:
			if s.PendingWithJob[r.Name] {
				out = append(out, r)
			}
		}
	}
	return out
}

// startedBefore orders runs by status.startedAt as times; a run without one
// sorts first (it is the oldest we can tell), then by name for stability.
func startedBefore(x, y *agentsv1alpha1.Agent) bool {
	xs, ys := x.Status.StartedAt, y.Status.StartedAt
	switch {
	case xs == nil && ys == nil:
		return x.Name < y.Name
	case xs == nil:
		return true
	case ys == nil:
		return false
	case !xs.Equal(ys):
		return xs.Before(ys)
	}
	return x.Name < y.Name
}

func setCondition(st *agentsv1alpha1.AgentStatus, s Snapshot, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: s.Agent.Generation, LastTransitionTime: metav1.Time{Time: s.Now},
	})
}

// realtimeSessionID reads a realtime run's last session id from its log,
// with the parser of the vendor its frozen run spec names; "" for other runs.
func realtimeSessionID(job *batchv1.Job, log string) string {
	if job.Spec.Template.Labels[agentsv1alpha1.LabelExecution] != string(agentsv1alpha1.ExecutionRealtime) {
		return ""
	}
	for _, c := range job.Spec.Template.Spec.Containers {
		if c.Name != agentsv1alpha1.AgentContainerName {
			continue
		}
		for _, e := range c.Env {
			if e.Name != runspec.EnvName {
				continue
			}
			spec, err := runspec.Decode(e.Value)
			if err != nil {
				return ""
			}
			return vendors.LastSessionID(vendors.Route(spec.Model), []byte(log))
		}
	}
	return ""
}
