package batch

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/vendors"
	"github.com/agentplane/agentplane/tools/fakevendor"
)

// Running (poll): a finished batch moves the Agent to Succeeded with output
// set to the vendor CLI's event lines, for each vendor; the model is the
// Agent's spec.model when set, else the definition's; the batch is deleted
// at the provider and the finalizer removed after the result is recorded.
func TestABatchRunSucceedsWithTheVendorCLIsLines(t *testing.T) {
	ns := namespace(t)
	before := snapshotLive()
	recipe(t, ns, "summary", recipeOpts{model: "claude-opus-5-5"})
	cases := []struct {
		rule, agent, model string
		provider           agentsv1alpha1.BatchProvider
		vendor             string
	}{
		{"the definition's model picks Anthropic", "via-definition", "", agentsv1alpha1.BatchProviderAnthropic, vendors.NameClaude},
		{"the Agent's spec.model wins and picks OpenAI", "via-agent-openai", "gpt-5.1", agentsv1alpha1.BatchProviderOpenAI, vendors.NameCodex},
		{"the Agent's spec.model wins and picks Gemini", "via-agent-gemini", "gemini-2.5-pro", agentsv1alpha1.BatchProviderGemini, vendors.NameGemini},
	}
	for _, tc := range cases {
		launch(t, ns, tc.agent, "summary", tc.model)
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			running := waitFor(t, ns, tc.agent, 30*time.Second, "Running with a batchId", func(a *agentsv1alpha1.Agent) bool {
				return a.Status.BatchID != "" || terminal(a)
			})
			if running.Status.BatchProvider != tc.provider || running.Status.StartedAt == nil {
				t.Errorf("batchProvider %q startedAt %v, want %q", running.Status.BatchProvider, running.Status.StartedAt, tc.provider)
			}
			a := waitFor(t, ns, tc.agent, 60*time.Second, "cleaned up", cleanedUp)
			if a.Status.Phase != agentsv1alpha1.PhaseSucceeded || a.Status.ExitCode == nil || *a.Status.ExitCode != 0 {
				t.Fatalf("phase %s exit %v reason %q", a.Status.Phase, a.Status.ExitCode, a.Status.FailureReason)
			}
			if a.Status.JobName != "" {
				t.Errorf("a batch run creates no Job, got %q", a.Status.JobName)
			}
			// The output reads back through the vendor's own parser as
			// the answer, exactly as a Job run's log would.
			v, _ := vendors.ByName(tc.vendor)
			p := v.NewParser()
			var messages, results int
			jsonLines(t, a.Status.Output)
			for _, line := range strings.Split(strings.TrimSpace(a.Status.Output), "\n") {
				evs, err := p.Parse([]byte(line))
				if err != nil {
					t.Errorf("%s parser refused %q: %v", tc.vendor, line, err)
				}
				for _, ev := range evs {
					switch ev.Kind {
					case vendors.KindMessage:
						messages++
					case vendors.KindResult:
						results++
						if ev.IsError {
							t.Errorf("result is an error: %+v", ev)
						}
					}
				}
			}
			if messages == 0 || results != 1 {
				t.Errorf("output has %d messages and %d results, want the answer and one result:\n%s", messages, results, a.Status.Output)
			}
			if atProvider(before, a) {
				t.Errorf("batch %s is still at the provider after cleanup", a.Status.BatchID)
			}
		})
	}
}

// Running (poll): a failed request's message becomes failureReason.
func TestAFailedRequestsMessageBecomesTheFailureReason(t *testing.T) {
	ns := namespace(t)
	recipe(t, ns, "doomed", recipeOpts{prompt: "Please FAKEVENDOR_FAIL now"})
	for _, model := range []string{"claude-opus-5-5", "gpt-5.1", "gemini-2.5-pro"} {
		launch(t, ns, "doomed-"+strings.Split(model, "-")[0], "doomed", model)
	}
	for _, model := range []string{"claude-opus-5-5", "gpt-5.1", "gemini-2.5-pro"} {
		name := "doomed-" + strings.Split(model, "-")[0]
		t.Run(model, func(t *testing.T) {
			a := waitFor(t, ns, name, 60*time.Second, "cleaned up", cleanedUp)
			if a.Status.Phase != agentsv1alpha1.PhaseFailed || !strings.Contains(a.Status.FailureReason, "FAKEVENDOR_FAIL") {
				t.Errorf("phase %s reason %q, want Failed with the vendor's message", a.Status.Phase, a.Status.FailureReason)
			}
		})
	}
}

// Pending → Running (submit): a definition that cannot run as a batch fails
// the Agent with the reason, and nothing reaches the vendor.
func TestADefinitionThatCannotRunAsABatchFails(t *testing.T) {
	ns := namespace(t)
	recipe(t, ns, "needs-pod", recipeOpts{mutate: func(s *agentsv1alpha1.AgentDefinitionSpec) {
		s.Resources = &agentsv1alpha1.AgentResources{Repos: []agentsv1alpha1.RepoSource{{Name: "r", URL: "https://example.com/r.git"}}}
	}})
	created := vendor.Calls("POST /v1/messages/batches")
	launch(t, ns, "a", "needs-pod", "")
	a := waitFor(t, ns, "a", 30*time.Second, "terminal", terminal)
	if a.Status.Phase != agentsv1alpha1.PhaseFailed || !strings.Contains(a.Status.FailureReason, "resources.repos") || a.Status.BatchID != "" {
		t.Errorf("status %+v", a.Status)
	}
	if vendor.Calls("POST /v1/messages/batches") != created {
		t.Error("a refused definition reached the vendor")
	}
}

// Station concurrency applies as for Jobs; under Replace a full Station's
// oldest Running run is deleted and the new Agent submits its batch, and
// the deleted run's in-flight batch is cancelled and cleaned up.
func TestReplacePreemptsTheOldestRunningBatch(t *testing.T) {
	configureVendor(t, func(o *fakevendor.Options) { o.Outcome = fakevendor.OutcomeNever })
	ns := namespace(t)
	before := snapshotLive()
	recipe(t, ns, "one", recipeOpts{max: 1, policy: agentsv1alpha1.ReplaceConcurrent})
	launch(t, ns, "old", "one", "")
	old := waitFor(t, ns, "old", 30*time.Second, "submitted", func(a *agentsv1alpha1.Agent) bool { return a.Status.BatchID != "" })
	launch(t, ns, "new", "one", "")
	waitFor(t, ns, "new", 30*time.Second, "submitted", func(a *agentsv1alpha1.Agent) bool { return a.Status.BatchID != "" })
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := suite.Env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "old"}, &agentsv1alpha1.Agent{})
		if client.IgnoreNotFound(err) == nil && err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the oldest run was not deleted")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if atProvider(before, old) {
		t.Errorf("the preempted run's batch %s was left at the provider", old.Status.BatchID)
	}
}

// launchTimingOut launches Agent "a" of a recipe named recipeName whose
// batch never ends, so that it times out after one timeoutUnit and does
// onTimeout. It returns the namespace, the recipe's sink and what was live
// at the provider before.
func launchTimingOut(t *testing.T, recipeName string, onTimeout agentsv1alpha1.OnTimeoutPolicy) (string, *sink, liveSet) {
	t.Helper()
	configureVendor(t, func(o *fakevendor.Options) { o.Outcome = fakevendor.OutcomeNever })
	ns := namespace(t)
	s := newSink(t)
	before := snapshotLive()
	recipe(t, ns, recipeName, recipeOpts{timeout: 1, onTimeout: onTimeout, sinkURL: s.URL})
	launch(t, ns, "a", recipeName, "")
	return ns, s, before
}

// Timeout with onTimeout: fail: the batch is cancelled, the Agent becomes
// Failed with "batch timed out", and the batch is deleted at the provider.
func TestATimedOutBatchFails(t *testing.T) {
	ns, s, before := launchTimingOut(t, "slow", agentsv1alpha1.OnTimeoutFail)
	a := waitFor(t, ns, "a", 30*time.Second, "cleaned up", cleanedUp)
	if a.Status.Phase != agentsv1alpha1.PhaseFailed || a.Status.FailureReason != "batch timed out" {
		t.Fatalf("status %+v", a.Status)
	}
	if got := a.Status.CompletedAt.Sub(a.Status.StartedAt.Time); got < timeoutUnit {
		t.Errorf("failed %s after start, before batch.timeoutMinutes (%s)", got, timeoutUnit)
	}
	if atProvider(before, a) {
		t.Error("the timed-out batch was left at the provider")
	}
	if vendor.Calls("POST /v1/messages/batches/{id}/cancel") == 0 {
		t.Error("the timed-out batch was never cancelled")
	}
	if got := s.waitLifecycles(t, "a", 2); !slices.Equal(got, []string{"agent/started", "batch_timeout/failed"}) {
		t.Errorf("sink lifecycle events %v", got)
	}
}

// Timeout with onTimeout: fallback: batchFallback = true keeping batchId,
// the ordinary Job is created, and from then on the Job transitions apply.
func TestATimedOutBatchFallsBackToAJob(t *testing.T) {
	ns, s, before := launchTimingOut(t, "fallback", agentsv1alpha1.OnTimeoutFallback)
	submitted := waitFor(t, ns, "a", 30*time.Second, "submitted", func(a *agentsv1alpha1.Agent) bool { return a.Status.BatchID != "" })
	fell := waitFor(t, ns, "a", 30*time.Second, "batchFallback", func(a *agentsv1alpha1.Agent) bool { return a.Status.BatchFallback })
	if fell.Status.BatchID != submitted.Status.BatchID || fell.Status.Phase != agentsv1alpha1.PhaseRunning {
		t.Errorf("fallback must keep batchId %q and stay Running: %+v", submitted.Status.BatchID, fell.Status)
	}
	a := waitFor(t, ns, "a", 90*time.Second, "terminal and cleaned up", cleanedUp)
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded || a.Status.JobName == "" || !a.Status.BatchFallback {
		t.Fatalf("the fallback Job's result is the run's: %+v", a.Status)
	}
	if atProvider(before, a) {
		t.Error("the timed-out batch was left at the provider")
	}
	got := s.waitLifecycles(t, "a", 3)
	if len(got) < 2 || got[0] != "agent/started" || got[1] != "batch_timeout/running" {
		t.Errorf("sink lifecycle events %v, want agent/started then batch_timeout/running, then the Job's own", got)
	}
}

// Timeout with fallback and a full Station: the Agent waits in Running
// until a slot frees, then its Job is created.
func TestAFallbackWaitsForAStationSlot(t *testing.T) {
	configureVendor(t, func(o *fakevendor.Options) { o.Outcome = fakevendor.OutcomeNever })
	ns := namespace(t)
	recipe(t, ns, "shared", recipeOpts{timeout: 2, onTimeout: agentsv1alpha1.OnTimeoutFallback, max: 2})
	launch(t, ns, "a", "shared", "")
	waitFor(t, ns, "a", 30*time.Second, "submitted", func(a *agentsv1alpha1.Agent) bool { return a.Status.BatchID != "" })
	launch(t, ns, "b", "shared", "")
	waitFor(t, ns, "b", 30*time.Second, "submitted", func(a *agentsv1alpha1.Agent) bool { return a.Status.BatchID != "" })
	// Both slots are held; the Station then shrinks to one, so when a
	// times out, b holds the only slot.
	station := &agentsv1alpha1.Station{}
	if err := suite.Env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "shared"}, station); err != nil {
		t.Fatal(err)
	}
	station.Spec.MaxConcurrentRuns = 1
	if err := suite.Env.Client.Update(context.Background(), station); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ns, "a", 30*time.Second, "batchFallback", func(a *agentsv1alpha1.Agent) bool { return a.Status.BatchFallback })
	time.Sleep(3 * controllerPoll)
	if a := get(t, ns, "a"); a.Status.Phase != agentsv1alpha1.PhaseRunning || a.Status.JobName != "" {
		t.Fatalf("with the Station full the fallback must wait in Running without a Job: %+v", a.Status)
	}
	if err := suite.Env.Client.Delete(context.Background(), get(t, ns, "b")); err != nil {
		t.Fatal(err)
	}
	a := waitFor(t, ns, "a", 90*time.Second, "terminal", terminal)
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded || a.Status.JobName == "" {
		t.Errorf("once the slot freed the fallback Job ran: %+v", a.Status)
	}
}
