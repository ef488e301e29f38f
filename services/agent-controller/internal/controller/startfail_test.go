package controller

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// TestAJobDeniedByPolicyFailsTheRunWithItsReason: a cluster policy that
// refuses the run's Job (here a ValidatingAdmissionPolicy, as a webhook
// would) fails the run with the policy's message instead of leaving it
// Pending with no reason.
func TestAJobDeniedByPolicyFailsTheRunWithItsReason(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	name := "deny-agent-jobs-" + ns
	policy := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}}}}}},
			Validations: []admissionv1.Validation{{Expression: "false", Message: "agent Jobs are not allowed in this namespace",
				Reason: ptr.To(metav1.StatusReasonForbidden)}},
		}}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}}
	if _, err := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{})
	})
	if _, err := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A policy takes effect once the API server has compiled it: wait
	// until a dry-run Job is denied before starting the run.
	probe := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}
	eventually(t, "the policy to deny Jobs", func() bool {
		_, err := env.Kube.BatchV1().Jobs(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "agent Jobs are not allowed")
	})
	start(t, ns)
	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "denied", "st")
	a := waitPhase(t, ns, "denied", agentsv1alpha1.PhaseFailed)
	if !strings.Contains(a.Status.FailureReason, "agent Jobs are not allowed in this namespace") {
		t.Fatalf("failure reason %q does not carry the policy's message", a.Status.FailureReason)
	}
	if c := meta.FindStatusCondition(a.Status.Conditions, agentsv1alpha1.ConditionResolved); c == nil || c.Reason != agentsv1alpha1.ReasonDenied {
		t.Fatalf("conditions %+v", a.Status.Conditions)
	}
}

// TestAJobOverQuotaWaitsAndShowsWhy: a quota that refuses the Job for now
// leaves the run Pending with the quota's error on its Started condition,
// and the run starts once the quota allows it.
func TestAJobOverQuotaWaitsAndShowsWhy(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-jobs", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}}}
	if _, err := env.Kube.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The quota controller must have counted usage before admission
	// enforces it.
	eventually(t, "the quota's usage", func() bool {
		q, err := env.Kube.CoreV1().ResourceQuotas(ns).Get(ctx, "no-jobs", metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil
	})
	start(t, ns)
	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "waits", "st")
	eventually(t, "the quota error on the Agent", func() bool {
		a := getAgent(t, ns, "waits")
		c := meta.FindStatusCondition(a.Status.Conditions, agentsv1alpha1.ConditionStarted)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == agentsv1alpha1.ReasonRetrying &&
			strings.Contains(c.Message, "exceeded quota")
	})
	if a := getAgent(t, ns, "waits"); a.Status.Phase != "" && a.Status.Phase != agentsv1alpha1.PhasePending {
		t.Fatalf("a quota refusal failed the run: %+v", a.Status)
	}
	if err := env.Kube.CoreV1().ResourceQuotas(ns).Delete(ctx, "no-jobs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a := waitPhase(t, ns, "waits", agentsv1alpha1.PhaseRunning)
	if c := meta.FindStatusCondition(a.Status.Conditions, agentsv1alpha1.ConditionStarted); c == nil || c.Reason != agentsv1alpha1.ReasonJobCreated {
		t.Fatalf("conditions %+v", a.Status.Conditions)
	}
}
