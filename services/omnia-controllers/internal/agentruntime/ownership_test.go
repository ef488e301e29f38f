package agentruntime

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// TestBuildGuards: a framework without an image waits for an edit
// (FrameworkReady False, Pending, no error, Warning event path), and a
// Deployment of the same name that the agent does not own is left alone
// (DeploymentReady False, error so the conflict is retried).
func TestBuildGuards(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	c := ctrltest.StartManager(t, env)
	r := &Reconciler{Client: c, Config: testConfig}
	cm, pack := packObjects(ns, "support-v1", "1.0.0", validPack)
	mustCreate(t, cm, pack)
	setPackPhase(t, pack, omniav1.PromptPackPhaseActive)
	prov := mockProvider(ns, "llm")
	mustCreate(t, prov)
	prov.Status.Phase = omniav1.ProviderPhaseReady
	if err := env.Client.Status().Update(ctx, prov); err != nil {
		t.Fatal(err)
	}
	mustCreate(t,
		newAgent(ns, "langchain", func(a *omniav1.AgentRuntime) {
			a.Spec.Framework = &omniav1.FrameworkConfig{Type: omniav1.FrameworkLangChain}
		}),
		newAgent(ns, "taken", nil),
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "mine"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "mine"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "mine:1"}}}}}})

	reconcileUntil := func(name string, wantErr bool) {
		ctrltest.Eventually(t, wait, func() error {
			_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
			if (err != nil) != wantErr {
				return err
			}
			return nil
		})
	}
	reconcileUntil("langchain", false)
	ctrltest.Eventually(t, wait, agentIs(ns, "langchain", omniav1.AgentRuntimePhasePending, omniav1.ConditionFrameworkReady, omniav1.ReasonFrameworkImageUnavailable))

	reconcileUntil("taken", true)
	ctrltest.Eventually(t, wait, agentIs(ns, "taken", omniav1.AgentRuntimePhaseFailed, omniav1.ConditionDeploymentReady, omniav1.ReasonDeploymentFailed))
	dep := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "taken"}, dep); err != nil {
		t.Fatal(err)
	}
	if dep.Spec.Template.Spec.Containers[0].Image != "mine:1" || len(dep.OwnerReferences) != 0 {
		t.Fatal("a Deployment the agent does not own was changed")
	}
}
