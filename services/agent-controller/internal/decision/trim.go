package decision

import (
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// TrimJob cuts job down, in place, to what the decisions and the
// controller read of a run's Job: its metadata (owners, labels,
// annotations, deletion), its active deadline, its pod template's
// execution label (the Job controller and the Station's template add
// several more), what picks the vendor's log parser from the run spec
// frozen into the agent container (routeOnly), the conversation the init
// container restores, and its whole status. Everything else of the pod
// template (volumes, resources, security contexts, the other variables)
// only takes memory in a cache that holds every run's Job: the controller
// never updates a Job from its cached copy, it only creates and deletes
// them. TestTrimJobKeepsDecisions holds the list to what the decisions
// read.
func TrimJob(job *batchv1.Job) {
	job.ManagedFields = nil
	tmpl := job.Spec.Template
	agent := keepEnv(tmpl.Spec.Containers, agentsv1alpha1.AgentContainerName, runspec.EnvName)
	for i := range agent {
		for j := range agent[i].Env {
			agent[i].Env[j].Value = routeOnly(agent[i].Env[j].Value)
		}
	}
	job.Spec = batchv1.JobSpec{
		ActiveDeadlineSeconds: job.Spec.ActiveDeadlineSeconds,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: executionLabel(tmpl.Labels)},
			Spec: corev1.PodSpec{
				Containers: agent,
				InitContainers: keepEnv(tmpl.Spec.InitContainers, jobbuild.InitContainerName,
					runspec.EnvConversationID, runspec.EnvConversationSource),
			},
		},
	}
}

// keepEnv returns the container named name of cs holding only its
// variables of the given names; nil when cs has no such container.
func keepEnv(cs []corev1.Container, name string, vars ...string) []corev1.Container {
	i := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		return nil
	}
	kept := corev1.Container{Name: name}
	for _, e := range cs[i].Env {
		if slices.Contains(vars, e.Name) {
			kept.Env = append(kept.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
		}
	}
	return []corev1.Container{kept}
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
