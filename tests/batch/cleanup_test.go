package batch

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/tools/fakevendor"
)

// Cleanup: deleting an Agent with the finalizer cancels its in-flight
// batch, cleans it up, then removes the finalizer so the delete goes through.
func TestDeletingAnAgentInFlightCancelsAndDeletesItsBatch(t *testing.T) {
	configureVendor(t, func(o *fakevendor.Options) { o.Outcome = fakevendor.OutcomeNever })
	ns := namespace(t)
	recipe(t, ns, "long", recipeOpts{})
	before := snapshotLive()
	for _, model := range []string{"claude-opus-5-5", "gpt-5.1", "gemini-2.5-pro"} {
		name := "del-" + strings.Split(model, "-")[0]
		t.Run(model, func(t *testing.T) {
			launch(t, ns, name, "long", model)
			a := waitFor(t, ns, name, 30*time.Second, "submitted with the finalizer", func(a *agentsv1alpha1.Agent) bool {
				return a.Status.BatchID != "" && slices.Contains(a.Finalizers, agentsv1alpha1.BatchCleanupFinalizer)
			})
			if !atProvider(before, a) {
				t.Fatalf("batch %s not at the provider while in flight", a.Status.BatchID)
			}
			if err := suite.Env.Client.Delete(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			waitGone(t, ns, name)
			if atProvider(before, a) {
				t.Errorf("batch %s left at the provider after the Agent's deletion", a.Status.BatchID)
			}
		})
	}
}

func waitGone(t *testing.T, ns, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := suite.Env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &agentsv1alpha1.Agent{})
		if err != nil && client.IgnoreNotFound(err) == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s still exists", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Cleanup: failed cleanups are retried and counted in
// status.batchCleanupAttempts; after 5 the finalizer is removed anyway and
// the provider object is left behind; each failed attempt also increments
// controller_batch_cleanup_failures_total, and the cleanup given up in
// controller_batch_cleanups_given_up_total (the AgentBatchCleanupGivenUp
// alert's input).
func TestFiveFailedCleanupsGiveUp(t *testing.T) {
	configureVendor(t, func(o *fakevendor.Options) { o.FailDeletes = true })
	ns := namespace(t)
	recipe(t, ns, "sticky", recipeOpts{})
	failures, givenUp := counter(t, "controller_batch_cleanup_failures_total"), counter(t, "controller_batch_cleanups_given_up_total")
	before := snapshotLive()
	launch(t, ns, "a", "sticky", "")
	a := waitFor(t, ns, "a", 90*time.Second, "cleanup given up", cleanedUp)
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded || a.Status.BatchCleanupAttempts != agentsv1alpha1.MaxBatchCleanupAttempts {
		t.Fatalf("phase %s (%q) batchCleanupAttempts %d, want Succeeded and %d", a.Status.Phase, a.Status.FailureReason, a.Status.BatchCleanupAttempts, agentsv1alpha1.MaxBatchCleanupAttempts)
	}
	if !atProvider(before, a) {
		t.Error("the provider object should be left behind when cleanup is given up")
	}
	// Retries wait 200ms, doubling: the five attempts span at least
	// 200+400+800+1600 ms after the result was recorded.
	if span := time.Since(a.Status.CompletedAt.Time); span < 3*time.Second {
		t.Errorf("five attempts within %s of the result: the retries do not back off", span)
	}
	if got := counter(t, "controller_batch_cleanup_failures_total") - failures; got != agentsv1alpha1.MaxBatchCleanupAttempts {
		t.Errorf("controller_batch_cleanup_failures_total rose by %v, want %d", got, agentsv1alpha1.MaxBatchCleanupAttempts)
	}
	if got := counter(t, "controller_batch_cleanups_given_up_total") - givenUp; got != 1 {
		t.Errorf("controller_batch_cleanups_given_up_total rose by %v, want 1", got)
	}
}

// counter sums the unlabelled counter name over the replicas: every
// number is its own process's, and the leader may change.
func counter(t *testing.T, name string) float64 {
	t.Helper()
	var sum float64
	for _, addr := range replicaAddr {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue // a replica being restarted
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
		_ = resp.Body.Close()
	}
	return sum
}

// Finalizer changes are JSON patches that touch only this one entry of
// metadata.finalizers: another finalizer added while the batch is in
// flight survives the controller's add and removal.
func TestAnotherFinalizerSurvives(t *testing.T) {
	configureVendor(t, func(o *fakevendor.Options) { o.Delay = 3 * time.Second })
	ns := namespace(t)
	recipe(t, ns, "shared-meta", recipeOpts{})
	before := snapshotLive()
	launch(t, ns, "a", "shared-meta", "")
	const other = "example.com/keep"
	// Race the controller's own add, with the same care: never overwrite.
	addOtherFinalizer(t, ns, "a", other)
	a := waitFor(t, ns, "a", 60*time.Second, "cleaned up", cleanedUp)
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded || !slices.Equal(a.Finalizers, []string{other}) {
		t.Errorf("phase %s (%q) finalizers %v, want Succeeded with only %s left", a.Status.Phase, a.Status.FailureReason, a.Finalizers, other)
	}
	if atProvider(before, a) {
		t.Error("batch left at the provider")
	}
	// Let the namespace go.
	if err := suite.Env.Client.Patch(context.Background(), a, client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op":"test","path":"/metadata/finalizers/0","value":"`+other+`"},{"op":"remove","path":"/metadata/finalizers/0"}]`))); err != nil {
		t.Fatal(err)
	}
}

// addOtherFinalizer puts f first in the Agent's finalizers without ever
// overwriting an entry, retrying when the list changed underneath.
func addOtherFinalizer(t *testing.T, ns, name, f string) {
	t.Helper()
	for i := 0; i < 50; i++ {
		cur := get(t, ns, name)
		patch := `[{"op":"add","path":"/metadata/finalizers/0","value":"` + f + `"}]`
		if len(cur.Finalizers) == 0 {
			patch = `[{"op":"test","path":"/metadata/resourceVersion","value":"` + cur.ResourceVersion + `"},` +
				`{"op":"add","path":"/metadata/finalizers","value":["` + f + `"]}]`
		}
		obj := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := suite.Env.Client.Patch(context.Background(), obj, client.RawPatch(types.JSONPatchType, []byte(patch))); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("could not add the other finalizer")
}
