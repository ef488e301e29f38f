package decision

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// The facts TrimJob keeps of a run's containers, as annotations of the
// cached copy only: a container struct costs about 400 bytes however
// little it holds, an annotation a few dozen. No Job on the server
// carries these keys (TrimJob removes any that one did), and the
// decisions read the containers of a Job that does not (one read whole).
const (
	trimmedRunSpec            = "trim.agents.re-cinq.com/run-spec"
	trimmedConversationID     = "trim.agents.re-cinq.com/conversation-id"
	trimmedConversationSource = "trim.agents.re-cinq.com/conversation-source"
	// trimmedMark says the Job was trimmed, so its facts are read from
	// the annotations above, which a fact it lacks is absent from.
	trimmedMark = "trim.agents.re-cinq.com/trimmed"
)

// TrimJob cuts job down, in place, to what the decisions and the
// controller read of a run's Job: its metadata (owners, annotations,
// deletion; not its labels), its active deadline, its pod template's
// execution label (the Job controller and the Station's template add
// several more), what picks the vendor's log parser from the run spec
// frozen into the agent container (routeOnly), the conversation the init
// container restores, and its status (of its conditions, those that tell
// its outcome). The container facts move to annotations of this copy
// (trimmedRunSpec and the others). Everything else of the pod template
// (volumes, resources, security contexts, the containers) only takes
// memory in a cache that holds every run's Job: the controller never
// updates a Job from its cached copy, it only creates and deletes them.
// TestTrimJobKeepsDecisions holds the list to what the decisions read.
// Trimming a trimmed copy changes nothing.
func TrimJob(job *batchv1.Job) {
	if trimmed(job) && len(job.Spec.Template.Spec.Containers) == 0 {
		// A Job on the server has a container at least: this is a copy
		// TrimJob made, whose facts are in its annotations already.
		return
	}
	job.ManagedFields = nil
	// Only the label selector reads a run Job's labels, on the server.
	job.Labels = nil
	job.Status.Conditions = outcomeConditions(job.Status.Conditions)
	for k := range job.Annotations {
		if strings.HasPrefix(k, trimmedPrefix) {
			delete(job.Annotations, k)
		}
	}
	// Read before the mark goes on: initConversation reads a marked Job's
	// annotations, an unmarked one's containers.
	spec, hasSpec := containerEnv(job.Spec.Template.Spec.Containers, agentsv1alpha1.AgentContainerName, runspec.EnvName)
	id, source := initConversation(job)
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[trimmedMark] = ""
	if hasSpec {
		job.Annotations[trimmedRunSpec] = routeOnly(spec)
	}
	if id != "" || source != "" {
		job.Annotations[trimmedConversationID], job.Annotations[trimmedConversationSource] = id, source
	}
	job.Spec = batchv1.JobSpec{
		ActiveDeadlineSeconds: job.Spec.ActiveDeadlineSeconds,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: executionLabel(job.Spec.Template.Labels)},
		},
	}
}

// outcomeConditions is conds cut to the conditions jobOutcome reads, in
// their order: Complete or Failed, and true. A Complete condition's reason
// and message are read by no one; the Job controller's other conditions
// (SuccessCriteriaMet, FailureTarget, Suspended) only say the same
// earlier.
func outcomeConditions(conds []batchv1.JobCondition) []batchv1.JobCondition {
	var kept []batchv1.JobCondition
	for _, c := range conds {
		switch {
		case c.Status != corev1.ConditionTrue:
		case c.Type == batchv1.JobComplete:
			kept = append(kept, batchv1.JobCondition{Type: c.Type, Status: c.Status})
		case c.Type == batchv1.JobFailed:
			kept = append(kept, batchv1.JobCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
	}
	return kept
}

// trimmedPrefix starts every annotation TrimJob sets.
const trimmedPrefix = "trim.agents.re-cinq.com/"

// trimmed reports whether job is a cached copy TrimJob made.
func trimmed(job *batchv1.Job) bool {
	_, ok := job.Annotations[trimmedMark]
	return ok
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

// initConversation is the conversation id and store of the init
// container, as they are set (either may be empty).
func initConversation(job *batchv1.Job) (id, source string) {
	if trimmed(job) {
		return job.Annotations[trimmedConversationID], job.Annotations[trimmedConversationSource]
	}
	init := job.Spec.Template.Spec.InitContainers
	id, _ = containerEnv(init, jobbuild.InitContainerName, runspec.EnvConversationID)
	source, _ = containerEnv(init, jobbuild.InitContainerName, runspec.EnvConversationSource)
	return id, source
}

// routeOnly re-encodes a frozen run spec with only the fields that pick a
// vendor's parser (lastSessionID): the prompt, parameters and the rest
// make up most of a spec and, kept for every cached Job, most of what the
// Job cache holds of it. A spec that does not decode is kept as it is, so
// it still decodes to nothing.
func routeOnly(encoded string) string {
	spec, err := runspec.Decode(encoded)
	if err != nil {
		return encoded
	}
	slim, err := runspec.Encode(&runspec.Spec{Model: spec.Model, Command: spec.Command})
	if err != nil {
		return encoded
	}
	return slim
}

// executionLabel is labels cut down to the run's execution mode, the one
// pod label a decision reads; nil when it has none.
func executionLabel(labels map[string]string) map[string]string {
	v, ok := labels[agentsv1alpha1.LabelExecution]
	if !ok {
		return nil
	}
	return map[string]string{agentsv1alpha1.LabelExecution: v}
}
