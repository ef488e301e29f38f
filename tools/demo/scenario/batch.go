package scenario

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// BatchAPIKey is the vendor key the demo's fake vendor server accepts and
// the batch recipe's agent-secrets carries, so a request without it is
// refused as a real vendor would refuse it.
const BatchAPIKey = "sk-demo-batch"

// batchKeyRef is the agent-secrets key holding BatchAPIKey: a key of its
// own, mapped to ANTHROPIC_API_KEY by the recipe's resources.secrets, so
// it sits beside the Job runs' keys in the namespace's one agent-secrets.
const batchKeyRef = "BATCH_ANTHROPIC_API_KEY"

// BatchRun is the demo's batch run: an Agent of an `execution: batch`
// recipe, answered by the vendor's batch API (docs/agent-controller.md,
// "Batch runs") instead of a pod.
const BatchRun = "digest-tides"

// batchStation is the Station, and its AgentDefinition, of BatchRun.
const batchStation = "digester"

// Stage is one step of a run that the demo waits for and shows, and the
// e2e suite asserts, in order.
type Stage struct {
	// What the run has reached, said as the demo prints it.
	What string
	// Reached reports whether a has reached the stage; Show describes it
	// once it has.
	Reached func(a *agentsv1alpha1.Agent) bool
	Show    func(a *agentsv1alpha1.Agent) string
}

// BatchStages are the steps of BatchRun: submitted, answered after
// batch-poller polled the batch to its end, and cleaned up at the provider.
var BatchStages = []Stage{
	{"submitted to the vendor's batch API",
		func(a *agentsv1alpha1.Agent) bool { return a.Status.BatchID != "" },
		func(a *agentsv1alpha1.Agent) string {
			return fmt.Sprintf("Running as %s batch %s", a.Status.BatchProvider, a.Status.BatchID)
		}},
	{"Succeeded once batch-poller saw the batch end",
		func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() },
		func(a *agentsv1alpha1.Agent) string {
			return fmt.Sprintf("%s, %d lines of output from the vendor", a.Status.Phase, strings.Count(strings.TrimSpace(a.Status.Output), "\n")+1)
		}},
	{"cleaned up at the provider (finalizer " + agentsv1alpha1.BatchCleanupFinalizer + " removed)",
		func(a *agentsv1alpha1.Agent) bool {
			return a.Status.Phase.IsTerminal() && !slices.Contains(a.Finalizers, agentsv1alpha1.BatchCleanupFinalizer)
		},
		func(a *agentsv1alpha1.Agent) string {
			return fmt.Sprintf("finalizers %v, %d failed cleanup attempts", a.Finalizers, a.Status.BatchCleanupAttempts)
		}},
}

// ApplyBatch creates the batch recipe (the vendor key in agent-secrets,
// an AgentDefinition with execution batch, its Station) and launches
// BatchRun in ns.
func ApplyBatch(ctx context.Context, c client.Client, ns string, out io.Writer) error {
	if err := putSecretKey(ctx, c, ns, batchKeyRef, BatchAPIKey); err != nil {
		return err
	}
	def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: batchStation, Namespace: ns},
		Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "Summarise {topic} in one line.",
			Execution: agentsv1alpha1.ExecutionBatch, Batch: &agentsv1alpha1.BatchSpec{MaxTokens: 256, TimeoutMinutes: 30},
			Resources: &agentsv1alpha1.AgentResources{Secrets: []agentsv1alpha1.SecretEnvEntry{{Name: "ANTHROPIC_API_KEY", Ref: batchKeyRef}}}}}
	// A batch run has no pod; the Station still needs a template, which a
	// fallback Job would use.
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: batchStation, Namespace: ns},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: batchStation, DeadlineMinutes: 5,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{agentContainer()}}}}}
	a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: BatchRun, Namespace: ns},
		Spec: agentsv1alpha1.AgentSpec{StationRef: batchStation, Parameters: map[string]string{"topic": "tides"}, TaskID: "demo-" + BatchRun}}
	for _, obj := range []client.Object{def, st, a} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
		}
	}
	fmt.Fprintf(out, "  applied the vendor key (secret/%s key %s), agentdefinition/%s (execution: batch), station/%s\n", agentsv1alpha1.AgentSecretsName, batchKeyRef, def.Name, st.Name)
	fmt.Fprintf(out, "  created agent/%s in Station %s — one prompt through the Anthropic batch API\n", a.Name, st.Name)
	return nil
}

// putSecretKey sets key in ns's agent-secrets, creating the Secret when
// the namespace has none.
func putSecretKey(ctx context.Context, c client.Client, ns, key, value string) error {
	sec := &corev1.Secret{}
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: agentsv1alpha1.AgentSecretsName}, sec)
	if apierrors.IsNotFound(err) {
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: agentsv1alpha1.AgentSecretsName, Namespace: ns},
			StringData: map[string]string{key: value}}
		return c.Create(ctx, sec)
	}
	if err != nil {
		return err
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	sec.Data[key] = []byte(value)
	return c.Update(ctx, sec)
}

// CheckBatch compares the cleaned-up BatchRun with what the recipe
// promises; "" when it keeps the promise.
func CheckBatch(a *agentsv1alpha1.Agent) string {
	switch {
	case a.Status.Phase != agentsv1alpha1.PhaseSucceeded || a.Status.ExitCode == nil || *a.Status.ExitCode != 0:
		return fmt.Sprintf("%s: phase %s exit %v (reason %q), promised Succeeded with exit 0", a.Name, a.Status.Phase, a.Status.ExitCode, a.Status.FailureReason)
	case a.Status.BatchProvider != agentsv1alpha1.BatchProviderAnthropic || a.Status.BatchID == "":
		return fmt.Sprintf("%s: batch %q at %q, promised one at anthropic", a.Name, a.Status.BatchID, a.Status.BatchProvider)
	case a.Status.JobName != "":
		return fmt.Sprintf("%s: created Job %s, a batch run has none", a.Name, a.Status.JobName)
	case !strings.Contains(a.Status.Output, "tides"):
		return fmt.Sprintf("%s: output %q lacks the vendor's answer about tides", a.Name, a.Status.Output)
	case slices.Contains(a.Finalizers, agentsv1alpha1.BatchCleanupFinalizer):
		return fmt.Sprintf("%s: finalizer %s still set", a.Name, agentsv1alpha1.BatchCleanupFinalizer)
	}
	return ""
}
