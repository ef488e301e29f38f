package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tests/internal/runs"
)

// recipe creates an AgentDefinition and a Station for it in ns.
func recipe(t *testing.T, ns, name, model, prompt string, deadline int32, vars map[string]string) {
	t.Helper()
	recipeWith(t, ns, name, model, prompt, deadline, func(s *agentsv1alpha1.AgentDefinitionSpec) {
		for k, v := range vars {
			s.Resources.Env = append(s.Resources.Env, agentsv1alpha1.EnvEntry{Name: k, Value: v})
		}
	})
}

// recipeWith is recipe with the definition's spec changed by mutate.
func recipeWith(t *testing.T, ns, name, model, prompt string, deadline int32, mutate func(*agentsv1alpha1.AgentDefinitionSpec)) {
	t.Helper()
	def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentDefinitionSpec{Model: model, Prompt: prompt, Resources: &agentsv1alpha1.AgentResources{}}}
	if mutate != nil {
		mutate(&def.Spec)
	}
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: name, DeadlineMinutes: deadline,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agentplane/runner:e2e"}}}}}}
	for _, o := range []client.Object{def, st} {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func launch(t *testing.T, ns, name, station string, params map[string]string) {
	t.Helper()
	a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentSpec{StationRef: station, Parameters: params}}
	if err := env.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

func waitTerminal(t *testing.T, ns, name string, within time.Duration) *agentsv1alpha1.Agent {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		a := &agentsv1alpha1.Agent{}
		if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, a); err == nil && a.Status.Phase.IsTerminal() {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s not terminal after %s: %+v", name, within, a.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func lifecycles(evs []*eventsv1.RunEvent) []string {
	var out []string
	for _, ev := range evs {
		if lc := ev.GetLifecycle(); lc != nil {
			out = append(out, lc.GetPhase()+"/"+lc.GetStatus())
		}
	}
	return out
}

// TestARunSucceedsEndToEnd: a Claude recipe runs through a real Job on the
// local node; the supervisor drives the mock CLI; the events reach NATS in
// order and the log tail reaches status.output through pods/log.
func TestARunSucceedsEndToEnd(t *testing.T) {
	ns := env.Namespace(t)
	recipe(t, ns, "fixer", "claude-opus-5-5", "Fix issue {issue}", 5, nil)
	launch(t, ns, "fix-42", "fixer", map[string]string{"issue": "42"})
	a := waitTerminal(t, ns, "fix-42", 2*time.Minute)
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded || *a.Status.ExitCode != 0 {
		t.Fatalf("status %+v", a.Status)
	}
	if !strings.Contains(a.Status.Output, `"type":"result"`) {
		t.Errorf("status.output lacks the CLI's result line (read back through pods/log):\n%s", a.Status.Output)
	}
	evs := runs.Stored(t, natsURL, ns, "fix-42", natsOpts...)
	kinds := map[eventsv1.EventKind]int{}
	for i, ev := range evs {
		kinds[ev.GetKind()]++
		if ev.GetSequence() != uint64(i+1) {
			t.Fatalf("event %d has sequence %d: stored out of order or twice", i, ev.GetSequence())
		}
	}
	if kinds[eventsv1.EventKind_EVENT_KIND_TOOL_CALL] == 0 || kinds[eventsv1.EventKind_EVENT_KIND_RESULT] != 1 {
		t.Errorf("event kinds %v: want tool calls and one result", kinds)
	}
	lc := lifecycles(evs)
	if len(lc) < 4 || lc[0] != "init/started" || lc[len(lc)-2] != "agent/started" || lc[len(lc)-1] != "agent/succeeded" {
		t.Errorf("lifecycle events %v: want the init container's, then agent/started … agent/succeeded", lc)
	}

	// The run's metrics: its start and end under its Station and vendor,
	// the Station's slots once the poll saw it end, and the events its
	// pod's supervisor reported on leaving (through the termination
	// message localnode copies into the container status).
	station := `namespace="` + ns + `",station="fixer"`
	active := `controller_station_active_runs{` + station + `}`
	var m map[string]float64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		m = scrape(t)
		if n, polled := m[active]; polled && n == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, c := range []struct {
		series string
		want   float64
	}{
		{`controller_runs_started_total{mode="job",` + station + `,vendor="claude"}`, 1},
		{`controller_runs_finished_total{namespace="` + ns + `",phase="Succeeded",station="fixer",vendor="claude"}`, 1},
		{active, 0},
		{`controller_station_max_concurrent_runs{` + station + `}`, 0},
	} {
		if got, ok := m[c.series]; !ok || got != c.want {
			t.Errorf("%s = %v (present %v), want %v", c.series, got, ok, c.want)
		}
	}
	// Other tests' runs add to these: at least this run's events.
	for kind, n := range kinds {
		series := `controller_run_events_total{kind="` + kind.SubjectToken() + `",vendor="claude"}`
		if m[series] < float64(n) {
			t.Errorf("%s = %v, want at least this run's %d", series, m[series], n)
		}
	}
}

// TestAFailingCLIFailsTheAgentWithItsExitCode: the CLI's exit code becomes
// the container's and then the Agent's.
func TestAFailingCLIFailsTheAgentWithItsExitCode(t *testing.T) {
	ns := env.Namespace(t)
	recipe(t, ns, "reviewer", "gpt-5-codex", "mock:fail review", 5, map[string]string{"MOCKAGENT_EXIT": "3"})
	launch(t, ns, "review-7", "reviewer", nil)
	a := waitTerminal(t, ns, "review-7", 2*time.Minute)
	if a.Status.Phase != agentsv1alpha1.PhaseFailed || *a.Status.ExitCode != 3 {
		t.Fatalf("status %+v", a.Status)
	}
	if a.Status.FailureReason == "" || a.Status.Output == "" {
		t.Errorf("a failed run keeps a reason and its output: %+v", a.Status)
	}
	if lc := lifecycles(runs.Stored(t, natsURL, ns, "review-7", natsOpts...)); len(lc) == 0 || lc[len(lc)-1] != "agent/failed" {
		t.Errorf("lifecycle events %v", lc)
	}
}

// The deadline path (a one-minute Station, exit 124) runs in
// TestTheDemoScenario as summarize-week.

// A batch definition on a controller without the batch component is
// tested in services/agent-controller/internal/controller: this suite's
// controller runs with it, for the demo's batch run (demo_batch_test.go).

// TestAConversationStoreOutageDoesNotFailTheRun: the definition continues a
// conversation from a store that answers 503. The init container skips the
// restore instead of failing the pod, the CLI starts a fresh conversation
// (no --resume of a session it does not have), the Agent succeeds, and its
// ConversationRestored condition says what happened, naming the store
// without its credentials.
func TestAConversationStoreOutageDoesNotFailTheRun(t *testing.T) {
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer store.Close()
	ns := env.Namespace(t)
	source := strings.Replace(store.URL, "http://", "http://u:store-secret@", 1) + "/conversations"
	recipeWith(t, ns, "continuer", "claude-opus-5-5", "Carry on", 5, func(s *agentsv1alpha1.AgentDefinitionSpec) {
		s.Resources.Conversation = &agentsv1alpha1.ConversationSpec{Source: source, ID: "conv-7"}
	})
	launch(t, ns, "carry-on", "continuer", nil)
	a := waitTerminal(t, ns, "carry-on", 2*time.Minute)
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded || *a.Status.ExitCode != 0 {
		t.Fatalf("status %+v: a conversation store outage must not fail the run", a.Status)
	}
	if strings.Contains(a.Status.Output, `"session_id":"conv-7"`) || !strings.Contains(a.Status.Output, `"type":"result"`) {
		t.Errorf("the CLI resumed the conversation it does not have instead of starting fresh:\n%s", a.Status.Output)
	}
	c := meta.FindStatusCondition(a.Status.Conditions, agentsv1alpha1.ConditionConversationRestored)
	want := `conversation "conv-7" could not be restored from ` + store.URL + `/conversations: status 503; starting a fresh conversation`
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != agentsv1alpha1.ReasonRestoreSkipped || c.Message != want {
		t.Fatalf("condition %+v, want False/%s %q", c, agentsv1alpha1.ReasonRestoreSkipped, want)
	}
	var skipped *eventsv1.Lifecycle
	for _, ev := range runs.Stored(t, natsURL, ns, "carry-on", natsOpts...) {
		if lc := ev.GetLifecycle(); lc.GetPhase() == "init" && lc.GetStatus() == "skipped" {
			skipped = lc
		}
	}
	if skipped == nil || skipped.GetTool() != "conversation" || skipped.GetReason() != "status-503" || skipped.GetMessage() != want {
		t.Errorf("init/skipped event %v, want tool conversation, reason status-503 and the condition's message", skipped)
	}
	for _, text := range []string{a.Status.Output, c.Message} {
		if strings.Contains(text, "store-secret") {
			t.Fatal("the store's credentials reached the Agent's status")
		}
	}
}
