package v1alpha1

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAgentPhaseIsTerminal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		phase AgentPhase
		want  bool
	}{
		{"unset phase is not terminal", "", false},
		{"pending is not terminal", PhasePending, false},
		{"running is not terminal", PhaseRunning, false},
		{"succeeded is terminal", PhaseSucceeded, true},
		{"failed is terminal", PhaseFailed, true},
		{"unknown phase is not terminal", "Unknown", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.phase.IsTerminal(); got != tc.want {
				t.Errorf("%q.IsTerminal() = %v, want %v", tc.phase, got, tc.want)
			}
			a := &Agent{Status: AgentStatus{Phase: tc.phase}}
			if got := a.IsTerminal(); got != tc.want {
				t.Errorf("Agent with phase %q: IsTerminal() = %v, want %v", tc.phase, got, tc.want)
			}
		})
	}
}

func TestAgentCurrentPhase(t *testing.T) {
	checkDefaulting(t, func(p AgentPhase) AgentPhase { return (&Agent{Status: AgentStatus{Phase: p}}).CurrentPhase() }, []defaulting[AgentPhase, AgentPhase]{
		{"absent phase reads as pending", "", PhasePending},
		{"running stays running", PhaseRunning, PhaseRunning},
		{"failed stays failed", PhaseFailed, PhaseFailed},
	})
}

func TestAgentEffectiveModel(t *testing.T) {
	def := func(model string) *AgentDefinition {
		return &AgentDefinition{Spec: AgentDefinitionSpec{Model: model}}
	}
	for _, tc := range []struct {
		name       string
		agentModel string
		def        *AgentDefinition
		want       string
	}{
		{"agent model overrides definition model", "gpt-5", def("claude-sonnet-4-6"), "gpt-5"},
		{"definition model when agent sets none", "", def("claude-sonnet-4-6"), "claude-sonnet-4-6"},
		{"default model when neither sets one", "", def(""), DefaultModel},
		{"default model without a definition", "", nil, DefaultModel},
		{"agent model without a definition", "gemini-3-pro", nil, "gemini-3-pro"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Agent{Spec: AgentSpec{Model: tc.agentModel}}
			if got := a.EffectiveModel(tc.def); got != tc.want {
				t.Errorf("EffectiveModel() = %q, want %q", got, tc.want)
			}
		})
	}
	if DefaultModel != "claude-opus-5-5" {
		t.Errorf("DefaultModel = %q, want claude-opus-5-5 (the documented default model, docs/agent-controller.md)", DefaultModel)
	}
}

func TestAgentWireNames(t *testing.T) {
	exit := int32(0)
	a := Agent{
		Spec: AgentSpec{
			StationRef: "s", TaskID: "t", TargetRepo: "o/r", Branch: "b",
			Parameters: map[string]string{"k": "v"}, Model: "m", ResumeSession: "sess",
		},
		Status: AgentStatus{
			Phase: PhaseSucceeded, JobName: "agent-job-a", ExitCode: &exit, BatchID: "batch_1",
			BatchProvider: BatchProviderAnthropic, BatchFallback: true, BatchCleanupAttempts: 2,
			SessionID: "sess-2", PRURL: "u", FailureReason: "r", Output: "o", ObservedGeneration: 1,
		},
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, section, key string
	}{
		{"spec.stationRef keeps its wire name", "spec", "stationRef"},
		{"spec.taskId keeps its wire name", "spec", "taskId"},
		{"spec.targetRepo keeps its wire name", "spec", "targetRepo"},
		{"spec.branch keeps its wire name", "spec", "branch"},
		{"spec.parameters keeps its wire name", "spec", "parameters"},
		{"spec.model keeps its wire name", "spec", "model"},
		{"spec.resumeSession keeps its wire name", "spec", "resumeSession"},
		{"status.phase keeps its wire name", "status", "phase"},
		{"status.jobName keeps its wire name", "status", "jobName"},
		{"status.exitCode zero is still written", "status", "exitCode"},
		{"status.prUrl keeps its wire name", "status", "prUrl"},
		{"status.batchId keeps its wire name", "status", "batchId"},
		{"status.batchProvider keeps its wire name", "status", "batchProvider"},
		{"status.batchFallback keeps its wire name", "status", "batchFallback"},
		{"status.batchCleanupAttempts keeps its wire name", "status", "batchCleanupAttempts"},
		{"status.sessionId keeps its wire name", "status", "sessionId"},
		{"status.failureReason keeps its wire name", "status", "failureReason"},
		{"status.observedGeneration keeps its wire name", "status", "observedGeneration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := m[tc.section][tc.key]; !ok {
				t.Errorf("%s.%s missing from %s", tc.section, tc.key, b)
			}
		})
	}
}

func TestAddToSchemeRegistersEveryKind(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Agent", "AgentList", "Station", "StationList", "AgentDefinition", "AgentDefinitionList"} {
		t.Run(kind+" is registered", func(t *testing.T) {
			gvk := schema.GroupVersionKind{Group: "agents.re-cinq.com", Version: "v1alpha1", Kind: kind}
			if !s.Recognizes(gvk) {
				t.Errorf("scheme does not recognise %v", gvk)
			}
		})
	}
}

// TestCheckSessionID: a session id is joined to the conversation store's
// URL and passed to the vendor CLI, so anything that would reach another
// path of the store or read as a flag is refused; every vendor's real ids
// pass.
func TestCheckSessionID(t *testing.T) {
	for _, tc := range []struct {
		rule string
		id   string
		ok   bool
	}{
		{"a Claude Code session id (UUID) passes", "3f0c9a52-6d1e-4b8a-9c7f-2a1e5d4b8c90", true},
		{"a Codex thread id (UUIDv7) passes", "0199a213-81c0-7800-8aa1-bbab2a035a53", true},
		{"an OpenCode session id passes", "ses_6b8a1f3c2ffeRkL2mN9pQ4sT7v", true},
		{"a short word passes", "sess-9", true},
		{"a path to another team's conversation is refused", "../team-b/x", false},
		{"a slash is refused", "team-b/x", false},
		{"a dot-dot alone is refused", "..", false},
		{"a dot is refused", "a.b", false},
		{"a leading dash (a CLI flag) is refused", "--dangerously-bypass-approvals-and-sandbox", false},
		{"a leading underscore is refused", "_x", false},
		{"a query is refused", "x?y=1", false},
		{"a percent escape is refused", "%2e%2e", false},
		{"whitespace is refused", "a b", false},
		{"a newline is refused", "a\nb", false},
		{"empty is refused", "", false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			err := CheckSessionID("spec.resumeSession", tc.id)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckSessionID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
			}
			if err != nil && (!errors.Is(err, ErrInvalidSessionID) || !strings.Contains(err.Error(), "spec.resumeSession")) {
				t.Fatalf("error %v does not wrap ErrInvalidSessionID or name the field", err)
			}
		})
	}
}
