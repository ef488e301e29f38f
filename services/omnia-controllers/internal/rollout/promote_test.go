package rollout

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
