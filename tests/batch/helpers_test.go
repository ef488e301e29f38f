package batch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/tests/internal/receiver"
	"github.com/agentplane/agentplane/tests/internal/runs"
	"github.com/agentplane/agentplane/tools/fakevendor"
)

// recipeOpts shape a batch recipe.
type recipeOpts struct {
	model     string
	prompt    string
	timeout   int32
	onTimeout agentsv1alpha1.OnTimeoutPolicy
	sinkURL   string
	max       int32
	policy    agentsv1alpha1.ConcurrencyPolicy
	mutate    func(*agentsv1alpha1.AgentDefinitionSpec)
}

// namespace returns a fresh namespace holding agent-secrets with every
// vendor's key.
func namespace(t *testing.T) string {
	t.Helper()
	ns := suite.Env.Namespace(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: agentsv1alpha1.AgentSecretsName, Namespace: ns},
		StringData: map[string]string{"ANTHROPIC_API_KEY": apiKey, "OPENAI_API_KEY": apiKey, "GEMINI_API_KEY": apiKey}}
	if err := suite.Env.Client.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	return ns
}

// recipe creates a batch AgentDefinition and its Station, both called name.
func recipe(t *testing.T, ns, name string, o recipeOpts) {
	t.Helper()
	if o.model == "" {
		o.model = "claude-opus-5-5"
	}
	if o.prompt == "" {
		o.prompt = "Summarise {topic} in one line."
	}
	if o.timeout == 0 {
		o.timeout = 30
	}
	def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentDefinitionSpec{Model: o.model, Prompt: o.prompt, Execution: agentsv1alpha1.ExecutionBatch,
			Batch: &agentsv1alpha1.BatchSpec{MaxTokens: 256, TimeoutMinutes: o.timeout, OnTimeout: o.onTimeout}}}
	if o.sinkURL != "" {
		def.Spec.Output = &agentsv1alpha1.OutputSpec{Sinks: []agentsv1alpha1.OutputSink{{Type: "http", URL: o.sinkURL}}}
	}
	if o.mutate != nil {
		o.mutate(&def.Spec)
	}
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: name, DeadlineMinutes: 5, MaxConcurrentRuns: o.max, ConcurrencyPolicy: o.policy,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agentplane/runner:e2e"}}}}}}
	for _, obj := range []client.Object{def, st} {
		if err := suite.Env.Client.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

func launch(t *testing.T, ns, name, station, model string) {
	t.Helper()
	a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentSpec{StationRef: station, Model: model, Parameters: map[string]string{"topic": "tides"}}}
	if err := suite.Env.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, ns, name string) *agentsv1alpha1.Agent {
	t.Helper()
	a := &agentsv1alpha1.Agent{}
	if err := suite.Env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, a); err != nil {
		t.Fatal(err)
	}
	return a
}

// waitFor polls the Agent until cond holds.
func waitFor(t *testing.T, ns, name string, within time.Duration, what string, cond func(*agentsv1alpha1.Agent) bool) *agentsv1alpha1.Agent {
	t.Helper()
	return runs.WaitFor(t, suite.Env.Client, ns, name, within, what, cond, nil)
}

func terminal(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() }

// cleanedUp is a finished run whose batch cleanup is done.
func cleanedUp(a *agentsv1alpha1.Agent) bool {
	for _, f := range a.Finalizers {
		if f == agentsv1alpha1.BatchCleanupFinalizer {
			return false
		}
	}
	return a.Status.Phase.IsTerminal()
}

// liveSet is what fakevendor holds, per provider.
type liveSet map[string]map[string]bool

func snapshotLive() liveSet {
	out := liveSet{}
	for p, ids := range vendor.Live() {
		out[p] = map[string]bool{}
		for _, id := range ids {
			out[p][id] = true
		}
	}
	return out
}

// atProvider reports whether fakevendor still holds anything of a's batch.
// OpenAI has no batch delete, so there it is the batch's files, told apart
// as those not already live in before (tests run one at a time).
func atProvider(before liveSet, a *agentsv1alpha1.Agent) bool {
	p := string(a.Status.BatchProvider)
	for _, id := range vendor.Live()[p] {
		if p == string(agentsv1alpha1.BatchProviderOpenAI) && !before[p][id] || id == a.Status.BatchID {
			return true
		}
	}
	return false
}

// configureVendor changes fakevendor's behaviour for batches created from
// now on, and restores it when the test ends.
func configureVendor(t *testing.T, f func(*fakevendor.Options)) {
	t.Helper()
	var saved fakevendor.Options
	vendor.Configure(func(o *fakevendor.Options) { saved = *o; f(o) })
	t.Cleanup(func() { vendor.Configure(func(o *fakevendor.Options) { *o = saved }) })
}

// sink is an http sink endpoint that knows only the documented payload.
type sink struct{ *receiver.Receiver }

func newSink(t *testing.T) *sink { return &sink{receiver.New(t)} }

func (s *sink) lifecycles(agent string) []string { return s.Lifecycles(agent) }

func (s *sink) count(agent string) int { return len(s.Of(agent)) }

// waitSink waits until the sink holds want lifecycle events for agent.
func (s *sink) waitLifecycles(t *testing.T, agent string, want int) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(s.lifecycles(agent)) < want && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	return s.lifecycles(agent)
}

// leader returns the identity holding the agent-controller Lease.
func leader(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		l := &coordinationv1.Lease{}
		err := suite.Env.Client.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "agent-controller"}, l)
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			return *l.Spec.HolderIdentity
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("no agent-controller leader")
	return ""
}

// jsonLines parses output as JSON lines, failing on any other line.
func jsonLines(t *testing.T, output string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(output), "\n") {
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("output line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}
