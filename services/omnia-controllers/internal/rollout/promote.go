package rollout

import (
	appsv1 "k8s.io/api/apps/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
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

// PromotionPending reports whether a promotion recorded in status.rollout
// has yet to write the candidate's references into the spec: the agent is
// still at the generation the promotion was decided on, so no spec write
// has happened since, and the candidate still differs from the spec. Any
// later generation (the promotion's own write, or an edit) is past it:
// the promotion then waits for the stable Deployment as the spec now
// builds it, which never removes a candidate that is still needed.
func PromotionPending(generation int64, spec *omniav1.AgentRuntimeSpec, st *omniav1.RolloutStatus) bool {
	return st != nil && st.Promoting && st.PromotedGeneration != nil && *st.PromotedGeneration == generation && Active(spec)
}
