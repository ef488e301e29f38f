package rollout

import (
	appsv1 "k8s.io/api/apps/v1"
)

// StableComplete reports whether a promotion can finish: the Deployment
// controller has seen the stable Deployment's latest spec and every
// replica runs it and is available. Until then the candidate keeps
// serving, so the promotion drops no traffic.
func StableComplete(dep *appsv1.Deployment) bool {
	if dep == nil {
		return false
	}
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	s := dep.Status
	return s.ObservedGeneration >= dep.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want
}
