package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
)

// Batch runs: a controller without the batch component (BATCH_ENABLED
// false, the default) fails an Agent of a batch definition with the
// reason, and creates nothing for it: no Job, no batch, no finalizer.
func TestABatchRunFailsWithoutTheBatchComponent(t *testing.T) {
	ns := env.Namespace(t)
	start(t, ns)
	def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "cheap", Namespace: ns},
		Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "p", Execution: agentsv1alpha1.ExecutionBatch}}
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: "cheap", Namespace: ns},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: "cheap", DeadlineMinutes: 5,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "runner"}}}}}}
	for _, o := range []client.Object{def, st} {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	mkAgent(t, ns, "nightly", "cheap")
	a := waitPhase(t, ns, "nightly", agentsv1alpha1.PhaseFailed)
	if a.Status.FailureReason != decision.ReasonBatchDisabled || a.Status.BatchID != "" || a.Status.JobName != "" || len(a.Finalizers) != 0 {
		t.Errorf("status %+v finalizers %v", a.Status, a.Finalizers)
	}
}
