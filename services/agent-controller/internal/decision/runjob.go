package decision

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// RunJob is what the controller holds of a run's Job: its identity, its
// controller and its deletion, and the facts the decisions read of its
// pod template and status, taken from the Job once (RunJobOf) when the
// watch, the poll or a live read brings it. The Job cache holds one per
// run, and a batchv1.Job takes 1,320 bytes before any field of it is
// filled (docs/benchmarks.md); the controller never writes a Job it read,
// it only creates and deletes them, so nothing else of one is needed.
type RunJob struct {
	// ObjectMeta holds the Job's namespace, name, uid, resourceVersion,
	// controller reference (its only owner reference kept) and deletion
	// timestamp; nothing else of the Job's metadata.
	metav1.ObjectMeta
	// Execution is the run's execution mode, the LabelExecution of the
	// Job's pod template; empty when the template has none.
	Execution agentsv1alpha1.ExecutionMode
	// FrozenSpec reports whether the agent container holds a run spec
	// that decodes; Model is that spec's model, which picks the vendor's
	// log parser and names the run's vendor.
	FrozenSpec bool
	Model      string
	// ConversationID and ConversationSource are the conversation the init
	// container restores and its store, as set on it (either may be
	// empty).
	ConversationID     string
	ConversationSource string
	// Finished reports whether the Job reached its end (jobOutcome),
	// Succeeded how, and FailReason the Job-level reason of a failure
	// (its Failed condition's reason and message).
	Finished   bool
	Succeeded  bool
	FailReason string
	// PodReady reports whether the Job counts a ready pod.
	PodReady bool
}

var _ runtime.Object = (*RunJob)(nil)

// RunJobOf is what the controller keeps of job.
func RunJobOf(job *batchv1.Job) *RunJob {
	r := &RunJob{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: job.Namespace, Name: job.Name, UID: job.UID,
			ResourceVersion: job.ResourceVersion, DeletionTimestamp: job.DeletionTimestamp,
		},
		Execution: agentsv1alpha1.ExecutionMode(job.Spec.Template.Labels[agentsv1alpha1.LabelExecution]),
		PodReady:  job.Status.Ready != nil && *job.Status.Ready > 0,
	}
	if ref := metav1.GetControllerOf(job); ref != nil {
		r.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	r.Finished, r.Succeeded, r.FailReason = jobOutcome(job)
	if encoded, ok := containerEnv(job.Spec.Template.Spec.Containers, agentsv1alpha1.AgentContainerName, runspec.EnvName); ok {
		if spec, err := runspec.Decode(encoded); err == nil {
			r.FrozenSpec, r.Model = true, spec.Model
		}
	}
	init := job.Spec.Template.Spec.InitContainers
	r.ConversationID, _ = containerEnv(init, jobbuild.InitContainerName, runspec.EnvConversationID)
	r.ConversationSource, _ = containerEnv(init, jobbuild.InitContainerName, runspec.EnvConversationSource)
	return r
}

// GetObjectKind is empty: a RunJob is only ever a Job's cached form.
func (r *RunJob) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns a deep copy of r.
func (r *RunJob) DeepCopyObject() runtime.Object {
	if r == nil {
		return nil
	}
	out := *r
	// Named, not promoted: RunJob's own copy is this function.
	meta := &r.ObjectMeta
	meta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

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

// containerEnv is the value of the variable named env of the container
// named name of cs; false when there is none.
func containerEnv(cs []corev1.Container, name, env string) (string, bool) {
	for _, c := range cs {
		if c.Name != name {
			continue
		}
		for _, e := range c.Env {
			if e.Name == env {
				return e.Value, true
			}
		}
	}
	return "", false
}
