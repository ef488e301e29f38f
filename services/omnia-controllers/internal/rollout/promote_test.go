package rollout

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

func TestStableComplete(t *testing.T) {
	dep := func(gen, observed int64, spec, replicas, updated, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: &spec},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available}}
	}
	cases := []struct {
		name string
		dep  *appsv1.Deployment
		want bool
	}{
		{"every replica updated and available is complete", dep(3, 3, 2, 2, 2, 2), true},
		{"unobserved generation is not complete", dep(4, 3, 2, 2, 2, 2), false},
		{"old replicas still running is not complete", dep(3, 3, 2, 3, 2, 2), false},
		{"replica not updated is not complete", dep(3, 3, 2, 2, 1, 2), false},
		{"replica not available is not complete", dep(3, 3, 2, 2, 2, 1), false},
		{"missing Deployment is not complete", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := StableComplete(tc.dep); got != tc.want {
				t.Fatalf("StableComplete = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPromotionPending: a promotion recorded in the status still has to
// write the spec exactly while the agent is at the generation it was
// decided on and the candidate still differs from the spec.
func TestPromotionPending(t *testing.T) {
	toV110 := &omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Version: sp("1.1.0")}}
	promoted := func() *omniav1.AgentRuntimeSpec { // the spec after the promotion's write
		s := withCandidate(toV110)
		s.PromptPackRef = *toV110.PromptPackRef.DeepCopy()
		return s
	}
	promoting := func(gen *int64) *omniav1.RolloutStatus {
		return &omniav1.RolloutStatus{Active: true, Promoting: true, CandidateVersion: "1.1.0", PromotedGeneration: gen}
	}
	cases := []struct {
		name string
		gen  int64
		spec *omniav1.AgentRuntimeSpec
		st   *omniav1.RolloutStatus
		want bool
	}{
		{"recorded at this generation, spec not written: pending", 4, withCandidate(toV110), promoting(sp(int64(4))), true},
		{"the spec write happened (a newer generation, candidate equal to the spec): not pending", 5, promoted(), promoting(sp(int64(4))), false},
		{"an edit since the record (a newer generation): not pending", 5, withCandidate(toV110), promoting(sp(int64(4))), false},
		{"candidate equal to the spec at the recorded generation: nothing to write", 4, promoted(), promoting(sp(int64(4))), false},
		{"a promotion recorded without its generation: not pending", 4, withCandidate(toV110), promoting(nil), false},
		{"no promotion recorded: not pending", 4, withCandidate(toV110), &omniav1.RolloutStatus{Active: true, PromotedGeneration: sp(int64(4))}, false},
		{"no rollout status: not pending", 4, withCandidate(toV110), nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := PromotionPending(tc.gen, tc.spec, tc.st); got != tc.want {
				t.Fatalf("PromotionPending = %v, want %v", got, tc.want)
			}
		})
	}
}
