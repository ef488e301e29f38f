package rollout

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

func TestAutoRollback(t *testing.T) {
	dep := func(conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "a-canary"}, Status: appsv1.DeploymentStatus{Conditions: conds}}
	}
	deadline := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}
	cases := []struct {
		name string
		mode omniav1.RollbackMode
		dep  *appsv1.Deployment
		want bool
	}{
		{"automatic with progress deadline exceeded rolls back", omniav1.RollbackAutomatic, dep(deadline), true},
		{"manual never rolls back by itself", omniav1.RollbackManual, dep(deadline), false},
		{"disabled never rolls back", omniav1.RollbackDisabled, dep(deadline), false},
		{"no candidate Deployment does not roll back", omniav1.RollbackAutomatic, nil, false},
		{"starting candidate does not roll back", omniav1.RollbackAutomatic,
			dep(appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}), false},
		{"unavailable candidate does not roll back", omniav1.RollbackAutomatic,
			dep(appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"}), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AutoRollback(tc.mode, tc.dep) != ""; got != tc.want {
				t.Fatalf("rollback = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRollbackVersion(t *testing.T) {
	cases := []struct {
		name string
		c    *omniav1.CandidateOverrides
		want string
	}{
		{"pinned candidate version is recorded", &omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "s", Version: sp("2.0.0")}}, "2.0.0"},
		{"candidate without a pinned version records nothing", &omniav1.CandidateOverrides{ToolRegistryRef: &omniav1.ToolRegistryRef{Name: "t"}}, ""},
		{"no candidate records nothing", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := RollbackVersion(tc.c); got != tc.want {
				t.Fatalf("RollbackVersion = %q, want %q", got, tc.want)
			}
		})
	}
}
