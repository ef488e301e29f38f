package rollout

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// reasonProgressDeadline is the Deployment controller's reason on a
// Progressing=False condition when pods did not become available in time.
const reasonProgressDeadline = "ProgressDeadlineExceeded"

// AutoRollback returns why the candidate must be rolled back for its
// health, "" when it need not be. Only rollback mode automatic rolls back,
// and only a candidate Deployment the Deployment controller gave up on
// counts: pods that are merely not ready yet are a candidate starting, and
// rolling back on those would abort every slow start. (A failed analysis
// is the other automatic rollback; Evaluate decides that one.)
func AutoRollback(mode omniav1.RollbackMode, dep *appsv1.Deployment) string {
	if mode != omniav1.RollbackAutomatic || dep == nil {
		return ""
	}
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == reasonProgressDeadline {
			return fmt.Sprintf("candidate Deployment %s exceeded its progress deadline", dep.Name)
		}
	}
	return ""
}

// RollbackVersion is the version to record in the last-rolled-back
// annotation: the candidate's pinned pack version, "" when it pins none
// (a track or provider candidate), in which case nothing is recorded.
func RollbackVersion(c *omniav1.CandidateOverrides) string {
	if c == nil || c.PromptPackRef == nil || c.PromptPackRef.Version == nil {
		return ""
	}
	return *c.PromptPackRef.Version
}
