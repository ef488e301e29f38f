package agentruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// conditionSays checks one condition of the agent: status, reason and a
// fragment of its message.
func conditionSays(ns, name, typ string, status metav1.ConditionStatus, reason, fragment string) func() error {
	return func() error {
		a, err := getAgent(ns, name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(a.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, fragment) {
			return fmt.Errorf("%s = %+v; want %s/%s mentioning %q", typ, c, status, reason, fragment)
		}
		return nil
	}
}

// TestHPAWriteFailureIsRecorded: when the HPA cannot be written, the pass
// still writes the status, with AutoscalingReady=False/Error naming the
// failure, after applying the Deployment and Service, and returns the
// error for a retry with backoff.
func TestHPAWriteFailureIsRecorded(t *testing.T) {
	ns, ctx, c := ctrltest.ByHand(t, env)
	readyInputs(t, ns)
	ctrltest.Create(t, env, newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.Runtime = &omniav1.RuntimeConfig{Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MaxReplicas: ptr(int32(4))}}
	}))
	refused := errors.New("injected: admission webhook refused the HorizontalPodAutoscaler")
	r := &Reconciler{Config: testConfig, Client: ctrltest.Intercept(c, interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
				return apierrors.NewForbidden(autoscalingv2.Resource("horizontalpodautoscalers"), obj.GetName(), refused)
			}
			return cl.Create(ctx, obj, opts...)
		},
	})}
	reconcileUntil(t, r, ns, "agent", func(err error) error {
		switch {
		case err == nil:
			return errors.New("no error; want the HPA write failure")
		case !apierrors.IsForbidden(err):
			return fmt.Errorf("want the HPA write failure, got: %w", err)
		}
		return nil
	})
	ctrltest.Eventually(t, wait, conditionSays(ns, "agent", omniav1.ConditionAutoscalingReady, metav1.ConditionFalse, omniav1.ReasonAutoscalingError, "injected"))
	ctrltest.Eventually(t, wait, conditionSays(ns, "agent", omniav1.ConditionDeploymentReady, metav1.ConditionTrue, omniav1.ReasonDeploymentCreated, ""))
	key := types.NamespacedName{Namespace: ns, Name: "agent"}
	if err := env.Client.Get(ctx, key, &appsv1.Deployment{}); err != nil {
		t.Fatalf("Deployment: %v", err)
	}
	if err := env.Client.Get(ctx, key, &corev1.Service{}); err != nil {
		t.Fatalf("Service: %v", err)
	}
}

// TestRolloutFailureStillAppliesStable: when the rollout engine fails —
// here a Deployment <name>-canary exists that the agent does not own —
// the stable Deployment is applied all the same, at its full count (the
// candidate is not serving), RolloutActive=True/RolloutFailed names the
// failure, and the error is returned for a retry; the foreign Deployment
// is left alone.
func TestRolloutFailureStillAppliesStable(t *testing.T) {
	ns, ctx, c := ctrltest.ByHand(t, env)
	readyInputs(t, ns)
	cm2, p2 := packObjects(ns, "support-v2", "1.1.0", validPack)
	ctrltest.Create(t, env, cm2, p2)
	setPackPhase(t, p2, omniav1.PromptPackPhaseActive)
	ctrltest.Create(t, env, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "agent" + CandidateSuffix, Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "mine"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "mine"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "mine:1"}}}}}})
	ctrltest.Create(t, env, newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.PromptPackRef.Version = ptr("1.0.0")
		a.Spec.Runtime = &omniav1.RuntimeConfig{Replicas: ptr(int32(2))}
		a.Spec.Rollout = &omniav1.RolloutConfig{
			Candidate:      roToV110(),
			Steps:          []omniav1.RolloutStep{{SetWeight: ptr(int32(50))}},
			TrafficRouting: &omniav1.TrafficRoutingConfig{Mode: omniav1.TrafficRoutingReplicaWeighted},
		}
	}))
	r := &Reconciler{Client: c, Config: testConfig}
	reconcileUntil(t, r, ns, "agent", failsWith("Deployment "+ns+"/agent"+CandidateSuffix+" exists and is not controlled by this AgentRuntime"))
	ctrltest.Eventually(t, wait, conditionSays(ns, "agent", omniav1.ConditionRolloutActive, metav1.ConditionTrue, omniav1.ReasonRolloutFailed,
		"agent"+CandidateSuffix+" exists and is not controlled by this AgentRuntime"))
	stable, err := roDeployment(ns, "agent")
	if err != nil {
		t.Fatalf("the stable Deployment was not applied: %v", err)
	}
	if roReplicas(stable) != 2 || roEnv(stable, "OMNIA_PROMPTPACK_VERSION") != "1.0.0" {
		t.Fatalf("stable replicas %d version %q; want the full 2 on 1.0.0", roReplicas(stable), roEnv(stable, "OMNIA_PROMPTPACK_VERSION"))
	}
	foreign, err := roDeployment(ns, "agent"+CandidateSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if len(foreign.OwnerReferences) != 0 || foreign.Spec.Template.Spec.Containers[0].Image != "mine:1" {
		t.Fatal("the foreign candidate Deployment was changed")
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "agent"}, &corev1.Service{}); err != nil {
		t.Fatalf("Service: %v", err)
	}
}
