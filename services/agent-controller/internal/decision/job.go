package decision

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// A job run is carried by a Kubernetes Job. A Pending run is admitted to a
// slot of its Station and started by creating its Job; a Running run is
// followed through its Job, writing nothing while the Job runs, and ends
// with what the Job and its pod say once the Job finished. Realtime
// sessions (realtime.go) take this path too, and so does a batch run once
// its fallback Job exists.

// Reasons a Job run ends with, besides the Job's own.
const (
	// ReasonJobGarbageCollected ends a Running run whose Job is gone before
	// its end was seen: nothing tells how the run went.
	ReasonJobGarbageCollected = "run record unavailable: Job garbage-collected before its result was observed"
	// ReasonPodGarbageCollected is a finished run whose pod, and so its
	// output, is gone.
	ReasonPodGarbageCollected = "run output unavailable: pod garbage-collected"
	// ReasonDeadline is a run the supervisor stopped at its deadline.
	ReasonDeadline = "deadline exceeded: the run was stopped at its Station's deadlineMinutes (exit code 124)"
)

// ExitDeadline is the supervisor's exit code for a run stopped at its deadline.
const ExitDeadline = 124

// decideJob is one pass over a job run.
func decideJob(s Snapshot) Plan {
	if s.Agent.Status.Phase == agentsv1alpha1.PhaseRunning {
		return followJob(s)
	}
	if s.Agent.Spec.ResumeSession != "" {
		return refuseInvalid(s, ReasonResumeNeedsRealtime)
	}
	if reason := preflight(s); reason != "" {
		return refuseInvalid(s, reason)
	}
	return startJob(s)
}

// startJob admits a Pending run to its Station and creates its Job, with
// the status patch to Running; or, without a free slot, queues it.
func startJob(s Snapshot) Plan {
	a := s.Agent
	if s.NameTaken != nil {
		return jobNameTaken(s, a.Status.DeepCopy())
	}
	// A run whose own Job exists was admitted already and lost the patch
	// to Running: it holds its slot, so it neither waits nor preempts, and
	// the patch is made again.
	plan, ok := admit(s, s.PendingWithJob[a.Name])
	if !ok {
		return plan
	}
	job, err := jobbuild.Build(jobbuild.Input{
		Agent: a, Station: s.Station, Definition: s.Definition,
		Model: a.EffectiveModel(s.Definition), Config: s.Config.Job,
	})
	if err != nil {
		return refuseInvalid(s, err.Error())
	}
	st := a.Status.DeepCopy()
	st.JobName = job.Name
	start(&plan, s, st, agentsv1alpha1.ReasonJobCreated, "Job "+job.Name+" created", jobRef(job.Namespace, job.Name))
	plan.CreateJob = job
	return plan
}

// followJob is one pass over a Running run tracked through its Job. The
// run ends when its Job finished, or when the Job is gone before its
// result was seen; until then the only write is the early restore
// condition.
func followJob(s Snapshot) Plan {
	st := s.Agent.Status.DeepCopy()
	st.JobName = JobNameOf(s.Agent)
	if s.Job == nil && s.NameTaken != nil {
		return jobNameTaken(s, st)
	}
	if s.Job == nil {
		return finish(s, st, agentsv1alpha1.PhaseFailed, 1, "", ReasonJobGarbageCollected, FailureOutputUnavailable)
	}
	done, succeeded, jobReason := s.Job.Finished, s.Job.Succeeded, s.Job.FailReason
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
	}
	if succeeded {
		// The run did its work; a lost output is said, but does not fail it.
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
	// The exit code agrees with the phase: a Failed run never reports 0.
	exit := int32(1)
	if s.Pod.ExitCode != nil && *s.Pod.ExitCode != 0 {
		exit = *s.Pod.ExitCode
	}
	// BackoffLimitExceeded only says the pod failed; the pod says how. A
	// Job-level reason of its own (DeadlineExceeded) is kept: it is the
	// same story told by Kubernetes.
	generic := jobReason == "" || strings.HasPrefix(jobReason, batchv1.JobReasonBackoffLimitExceeded)
	initFailed := setInitFailedCondition(st, s)
	switch {
	case initFailed != nil && generic:
		// The agent container never ran: the init step is what failed,
		// and its exit code is the pod's.
		reason = InitFailureReason(initFailed)
		if initFailed.ExitCode != 0 {
			exit = initFailed.ExitCode
		}
	case exit == ExitDeadline && generic:
		// The supervisor stops the CLI just before the Job's deadline, so
		// the Job only sees a failed pod; say what really happened.
		reason = ReasonDeadline
	}
	if reason == "" {
		// A Job marked Failed without a reason (another writer's): the
		// exit code is still a reason.
		reason = fmt.Sprintf("the run failed with exit code %d", exit)
	}
	return finish(s, st, agentsv1alpha1.PhaseFailed, exit, output, reason, FailureJobFailed)
}

// JobNameOf is the Agent's Job name: status.jobName, or the derived name
// when a crash between creating the Job and patching the status lost it.
func JobNameOf(a *agentsv1alpha1.Agent) string {
	if a.Status.JobName != "" {
		return a.Status.JobName
	}
	return jobbuild.JobName(a.Name)
}
