package decision

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// A run's Job is found by its name (agent-job-<agent>), but a name proves
// nothing: whoever may create Jobs in the namespace can create one of that
// name first, mark it succeeded and so fake the run's result, and an Agent
// deleted and created again under the same name finds its predecessor's
// Job until garbage collection removes it. Only the Job whose controller
// owner reference carries this Agent's uid is the run's Job
// (Snapshot.Job); the controller reads the result, the log and the pod
// only from it, and only from a pod that Job controls. Any other Job of
// that name (Snapshot.NameTaken) is never adopted and never read: the run
// waits while it is a deleted predecessor's, which garbage collection is
// about to remove, and fails when it is anything else.

// PredecessorWait is how often a run waiting for a predecessor's Job
// looks again; the Job's deletion wakes it sooner.
const PredecessorWait = 5 * time.Second

// IsRunJob reports whether job is a's Job: controlled by a's uid.
func IsRunJob(job *RunJob, a *agentsv1alpha1.Agent) bool {
	return job != nil && a != nil && a.UID != "" && metav1.IsControlledBy(job, a)
}

// IsRunPod reports whether pod belongs to job: controlled by job's uid. A
// pod merely labelled with the Job's name may be anyone's.
func IsRunPod(pod *corev1.Pod, job *RunJob) bool {
	return pod != nil && job != nil && job.UID != "" && metav1.IsControlledBy(pod, job)
}

// predecessorOf reports whether job is controlled by another Agent of a's
// name: one deleted before a was created, whose Job the garbage collector
// removes.
func predecessorOf(job *RunJob, a *agentsv1alpha1.Agent) bool {
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.Kind != "Agent" || ref.Name != a.Name || ref.UID == a.UID {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == agentsv1alpha1.GroupVersion.Group
}

// jobNameTaken is the plan of a run whose Job name is held by a Job it
// does not control (s.NameTaken). A deleted predecessor's Job is waited
// for: a Pending run shows it on its Started condition, once; a started
// run (a batch falling back to a Job) writes nothing. Any other Job fails
// the run, naming it; st is the status a started run ends with.
func jobNameTaken(s Snapshot, st *agentsv1alpha1.AgentStatus) Plan {
	a, job := s.Agent, s.NameTaken
	started := a.Status.Phase == agentsv1alpha1.PhaseRunning
	if predecessorOf(job, a) {
		if started {
			return Plan{RequeueAfter: PredecessorWait}
		}
		return waitForPredecessor(s)
	}
	owner := "no controller"
	if ref := metav1.GetControllerOf(job); ref != nil {
		owner = fmt.Sprintf("controller %s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
	}
	reason := fmt.Sprintf("Job %s already exists and is not controlled by this Agent (uid %s) but by %s: it is never adopted or read for the run's result; delete it, or run under another Agent name",
		job.Name, a.UID, owner)
	if started {
		return finish(s, st, agentsv1alpha1.PhaseFailed, 1, "", reason, FailureInvalidSpec)
	}
	return fail(s, reason, FailureInvalidSpec, agentsv1alpha1.ReasonJobNameTaken)
}

// waitForPredecessor keeps the run Pending with Started=False /
// WaitingForPreviousJob. A run already shown waiting is not rewritten.
func waitForPredecessor(s Snapshot) Plan {
	plan := Plan{RequeueAfter: PredecessorWait}
	c := meta.FindStatusCondition(s.Agent.Status.Conditions, agentsv1alpha1.ConditionStarted)
	if c != nil && c.Reason == agentsv1alpha1.ReasonWaitingForPreviousJob {
		return plan
	}
	ref := metav1.GetControllerOf(s.NameTaken)
	msg := fmt.Sprintf("Job %s of an earlier Agent named %s (uid %s) still exists; the run starts once Kubernetes garbage collection has removed it",
		s.NameTaken.Name, ref.Name, ref.UID)
	st := s.Agent.Status.DeepCopy()
	if st.Phase == "" {
		st.Phase = agentsv1alpha1.PhasePending
	}
	setCondition(st, s, agentsv1alpha1.ConditionResolved, metav1.ConditionTrue, agentsv1alpha1.ReasonResolved, "Station and AgentDefinition found")
	setCondition(st, s, agentsv1alpha1.ConditionStarted, metav1.ConditionFalse, agentsv1alpha1.ReasonWaitingForPreviousJob, msg)
	plan.Status = st
	plan.Events = []Event{newEvent(corev1.EventTypeNormal, EventWaitingForPreviousJob, actionAdmit, msg)}
	return plan
}

// JobNameTaken is the plan when creating the run's Job found a Job of its
// name that the run does not control (job): the Job was not in the watched
// cache (it lacks the run pods' label) when the pass decided.
func JobNameTaken(s Snapshot, job *RunJob) Plan {
	s.NameTaken = job
	st := s.Agent.Status.DeepCopy()
	return jobNameTaken(s, st)
}

// The Secrets a run's pod mounts (its NATS credential, a realtime
// session's token) are named from the Agent's uid, which anyone who can
// read the Agent knows before the controller writes them: whoever may
// create Secrets in the namespace can create one first, with a credential
// or token of their choosing. Only a Secret the controller wrote for this
// run (controlled by the Agent's uid, immutable, with the content the
// controller derives for the run) is the run's; the run never starts with
// any other.

// ReasonSecretNameTaken is the Resolved condition's reason on a run that
// failed because a Secret of its name is not its own.
const ReasonSecretNameTaken = "SecretNameTaken"

// SecretNameTaken is the plan when the run's Secret name (secret) is held
// by a Secret that is not the run's; why says how it differs, without its
// content. A Pending run fails before its Job exists; a started one (a
// batch falling back to a Job) ends Failed.
func SecretNameTaken(s Snapshot, secret, why string) Plan {
	a := s.Agent
	reason := fmt.Sprintf("Secret %s already exists and %s: the run never mounts it; delete it and create the Agent again", secret, why)
	if a.Status.Phase == agentsv1alpha1.PhaseRunning {
		return finish(s, a.Status.DeepCopy(), agentsv1alpha1.PhaseFailed, 1, "", reason, FailureInvalidSpec)
	}
	return fail(s, reason, FailureInvalidSpec, ReasonSecretNameTaken)
}
