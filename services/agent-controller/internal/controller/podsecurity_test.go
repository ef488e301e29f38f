package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// TestARunWhosePodBreaksRestrictedFailsAndCreatesNothing attacks through a
// Station that admission lets in (running as root is baseline) but whose
// sidecar asks for root: at the default level, restricted, the Job build
// refuses it, so the Agent fails with the reason naming the container and
// the field, and no Job (nor anything else) is created for it.
func TestARunWhosePodBreaksRestrictedFailsAndCreatesNothing(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	start(t, ns)
	mkStation(t, ns, "st", func(s *agentsv1alpha1.StationSpec) {
		s.Template.Spec.Containers = append(s.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "proxy",
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}})
	})
	mkAgent(t, ns, "root-sidecar", "st")
	a := waitPhase(t, ns, "root-sidecar", agentsv1alpha1.PhaseFailed)
	for _, w := range []string{`PodSecurity "restricted:latest"`, `container "sidecar" must not set runAsUser=0`} {
		if !strings.Contains(a.Status.FailureReason, w) {
			t.Errorf("failure reason %q does not name %s", a.Status.FailureReason, w)
		}
	}
	if a.Status.JobName != "" {
		t.Errorf("status names a Job, %q, for a run that must have none", a.Status.JobName)
	}
	// Give a wrongly created Job time to show: a later pass of the
	// controller (poll every 2 s) would retry a creation too.
	time.Sleep(3 * time.Second)
	jobs, err := env.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 0 {
		t.Errorf("%d Jobs were created for a refused run: %s", len(jobs.Items), jobs.Items[0].Name)
	}
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("%d pods exist for a refused run", len(pods.Items))
	}
}
