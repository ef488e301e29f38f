package decision

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// TrimJob cuts job down, in place, to what the decisions and the
// controller read of a run's Job: its metadata (owners, labels,
// annotations, deletion), its active deadline, its pod template's labels,
// the run spec frozen into the agent container, the conversation the init
// container restores, and its whole status. Everything else of the pod
// template (volumes, resources, security contexts, the other variables)
// only takes memory in a cache that holds every run's Job: the controller
// never updates a Job from its cached copy, it only creates and deletes
// them. TestTrimJobKeepsDecisions holds the list to what the decisions
// read.
func TrimJob(job *batchv1.Job) {
	job.ManagedFields = nil
	spec := &job.Spec
	tmpl := spec.Template
	spec.Template = corev1.PodTemplateSpec{}
	spec.Template.Labels = tmpl.Labels
	spec.Template.Spec.Containers = keepEnv(tmpl.Spec.Containers, agentsv1alpha1.AgentContainerName, runspec.EnvName)
	spec.Template.Spec.InitContainers = keepEnv(tmpl.Spec.InitContainers, jobbuild.InitContainerName,
		runspec.EnvConversationID, runspec.EnvConversationSource)
	*spec = batchv1.JobSpec{ActiveDeadlineSeconds: spec.ActiveDeadlineSeconds, Template: spec.Template}
}

// keepEnv returns the container named name of cs holding only its
// variables of the given names; nil when cs has no such container.
func keepEnv(cs []corev1.Container, name string, vars ...string) []corev1.Container {
	for _, c := range cs {
		if c.Name != name {
			continue
		}
		kept := corev1.Container{Name: name}
		for _, e := range c.Env {
			for _, v := range vars {
				if e.Name == v {
					kept.Env = append(kept.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
				}
			}
		}
		return []corev1.Container{kept}
	}
	return nil
}
