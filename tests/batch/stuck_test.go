package batch

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/tools/fakevendor"
)

// A recipe edited after its batch was submitted, to a model of another
// vendor, still lets the run finish: the batch is asked about as the
// provider that holds it, not refused as a model that provider lacks.
func TestARecipeEditedAfterSubmitDoesNotStrandItsBatch(t *testing.T) {
	configureVendor(t, func(o *fakevendor.Options) { o.Delay = 3 * time.Second })
	ns := namespace(t)
	before := snapshotLive()
	recipe(t, ns, "edited", recipeOpts{})
	launch(t, ns, "a", "edited", "")
	waitFor(t, ns, "a", 30*time.Second, "submitted", func(a *agentsv1alpha1.Agent) bool { return a.Status.BatchID != "" })
	def := &agentsv1alpha1.AgentDefinition{}
	if err := suite.Env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "edited"}, def); err != nil {
		t.Fatal(err)
	}
	def.Spec.Model = "gpt-5-codex"
	if err := suite.Env.Client.Update(context.Background(), def); err != nil {
		t.Fatal(err)
	}
	a := waitFor(t, ns, "a", 60*time.Second, "terminal and cleaned up", cleanedUp)
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded || a.Status.BatchProvider != agentsv1alpha1.BatchProviderAnthropic {
		t.Fatalf("status %+v", a.Status)
	}
	if atProvider(before, a) {
		t.Error("the batch was left at the provider")
	}
}

// A batch whose status can no longer be read (here the vendor lost it, so
// every query answers 404) still times out at batch.timeoutMinutes and
// fails with its reason, instead of staying Running forever.
func TestABatchWhoseStatusCannotBeReadStillTimesOut(t *testing.T) {
	configureVendor(t, func(o *fakevendor.Options) { o.Outcome = fakevendor.OutcomeNever })
	ns := namespace(t)
	recipe(t, ns, "lost", recipeOpts{timeout: 3, onTimeout: agentsv1alpha1.OnTimeoutFail})
	launch(t, ns, "a", "lost", "")
	a := waitFor(t, ns, "a", 30*time.Second, "submitted", func(a *agentsv1alpha1.Agent) bool { return a.Status.BatchID != "" })
	if !vendor.Lose(a.Status.BatchID) {
		t.Fatalf("fakevendor does not hold batch %s", a.Status.BatchID)
	}
	a = waitFor(t, ns, "a", 90*time.Second, "terminal and cleaned up", cleanedUp)
	if a.Status.Phase != agentsv1alpha1.PhaseFailed || a.Status.FailureReason != "batch timed out" {
		t.Fatalf("status %+v", a.Status)
	}
}
