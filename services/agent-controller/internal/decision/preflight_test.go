package decision

import (
	"strings"
	"testing"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/prompt"
	"github.com/agentplane/agentplane/libs/vendors"
)

// bomb makes s's prompt render to about 64 MB: 4,000 placeholders, each
// filled with a 16 KiB value, both within admission's limits.
func bomb(s Snapshot) Snapshot {
	s.Definition.Spec.Prompt = strings.Repeat("{p}", 4000)
	s.Agent.Spec.Parameters = map[string]string{"p": strings.Repeat("x", 16<<10)}
	return s
}

// TestAPromptOverTheCapFailsTheRunBeforeItStarts is the attack of an Agent
// whose parameters render its definition's prompt far past the cap: in
// every mode the run fails at Pending, naming the cap and the sizes,
// without rendering the prompt, and nothing is started.
func TestAPromptOverTheCapFailsTheRunBeforeItStarts(t *testing.T) {
	cases := []struct {
		rule string
		snap Snapshot
	}{
		{"a batch run, whose prompt the controller renders, fails", batchSnap(agent("a", ""), "")},
		{"a batch run falling back to a Job fails", batchSnap(agent("a", ""), agentsv1alpha1.OnTimeoutFallback)},
		{"a Job run fails", snap(agent("a", ""))},
		{"a realtime session fails", realtimeSnap(agent("a", ""))},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			var p Plan
			allocs := testing.AllocsPerRun(5, func() { p = Decide(bomb(c.snap)) })
			if p.Submit != nil || p.CreateJob != nil || p.RunToken {
				t.Fatalf("the run was started: %+v", p)
			}
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "more than the 1048576-byte cap")
			if !strings.Contains(p.Status.FailureReason, "12000-byte template") || !strings.Contains(p.Status.FailureReason, "AgentDefinition def") {
				t.Errorf("the reason does not name the sizes and the definition: %q", p.Status.FailureReason)
			}
			if p.Outcome.Failure != FailureInvalidSpec {
				t.Errorf("kind %s", p.Outcome.Failure)
			}
			// Deciding costs the same handful of small allocations as any
			// refusal, not a rendered prompt.
			if allocs > 200 {
				t.Errorf("deciding made %v allocations", allocs)
			}
		})
	}
}

// TestAPromptAtTheCapStillRuns: the cap is on the output, inclusive. (A
// batch run shows it: a Job run's frozen spec has its own, lower limit.)
func TestAPromptAtTheCapStillRuns(t *testing.T) {
	s := batchSnap(agent("a", ""), "")
	s.Definition.Spec.Prompt = "{p}"
	s.Agent.Spec.Parameters = map[string]string{"p": strings.Repeat("x", prompt.MaxRenderedBytes)}
	if p := Decide(s); p.Submit == nil || len(p.Submit.Prompt) != prompt.MaxRenderedBytes {
		t.Fatalf("a prompt of exactly the cap was refused: %+v", p.Status)
	}
	s.Agent.Spec.Parameters["p"] += "x"
	if p := Decide(s); p.Submit != nil {
		t.Fatal("a prompt one byte over the cap was submitted")
	}
}

// TestAResumedSessionsPromptIsNotCounted: a resumed realtime session sends
// no initial prompt, so its size cannot refuse it.
func TestAResumedSessionsPromptIsNotCounted(t *testing.T) {
	a := agent("a", "")
	a.Spec.ResumeSession = "3f0c9a52-6d1e-4b8a-9c7f-2a1e5d4b8c90"
	if p := Decide(bomb(realtime(a))); p.CreateJob == nil {
		t.Fatalf("refused: %+v", p.Status)
	}
}

// TestAModelOverrideNeverDropsTheRecipesToolRules is the attack of an
// Agent whose spec.model moves the run to a vendor whose CLI cannot
// enforce the definition's tool rules: a denied tool would become usable,
// or an allow list would stop limiting the agent. Such an Agent fails at
// Pending naming the model and the rule; overrides that lose nothing run.
func TestAModelOverrideNeverDropsTheRecipesToolRules(t *testing.T) {
	deny := func(d *agentsv1alpha1.AgentDefinitionSpec) { d.DisallowedTools = []string{"Bash(rm:*)", "WebFetch"} }
	allow := func(d *agentsv1alpha1.AgentDefinitionSpec) { d.AllowedTools = []string{"Read"} }
	bypass := func(d *agentsv1alpha1.AgentDefinitionSpec) {
		allow(d)
		d.PermissionMode = agentsv1alpha1.PermissionBypass
	}
	cases := []struct {
		rule     string
		defModel string
		override string
		recipe   func(*agentsv1alpha1.AgentDefinitionSpec)
		// lost names the rule the refusal must name; "" means the run starts.
		lost string
	}{
		{"claude's denied tools are lost on codex", "claude-opus-5-5", "gpt-5-codex", deny, "disallowed_tools (2)"},
		{"claude's allow list is lost on codex", "claude-opus-5-5", "gpt-5-codex", allow, "allowed_tools (1, permission_mode auto)"},
		{"claude's allow list is lost on opencode", "claude-opus-5-5", "opencode/anthropic/claude-sonnet-4-6", allow, "allowed_tools"},
		{"gemini's denied tools are lost on exec", "gemini-3-pro", "exec", deny, "disallowed_tools"},
		{"the default model's (claude's) denied tools are lost on codex", "", "o4-mini", deny, "disallowed_tools"},
		{"claude's denied tools carry to opencode", "claude-opus-5-5", "opencode/anthropic/claude-sonnet-4-6", deny, ""},
		{"claude's tool rules carry to gemini", "claude-opus-5-5", "gemini-3-pro", func(d *agentsv1alpha1.AgentDefinitionSpec) { deny(d); allow(d) }, ""},
		{"an allow list means nothing in bypass, so codex loses nothing", "claude-opus-5-5", "gpt-5-codex", bypass, ""},
		{"another model of the same vendor loses nothing", "claude-opus-5-5", "claude-sonnet-4-6", deny, ""},
		{"a recipe without tool rules may move anywhere", "claude-opus-5-5", "gpt-5-codex", nil, ""},
		{"a recipe whose own vendor enforces nothing loses nothing", "gpt-5-codex", "claude-opus-5-5", deny, ""},
	}
	for _, c := range cases {
		for _, mode := range []struct {
			name string
			snap func(*agentsv1alpha1.Agent) Snapshot
		}{
			{"job", snap}, {"realtime", realtimeSnap},
			{"batch with fallback", func(a *agentsv1alpha1.Agent) Snapshot { return batchSnap(a, agentsv1alpha1.OnTimeoutFallback) }},
		} {
			t.Run(mode.name+": "+c.rule, func(t *testing.T) {
				a := agent("a", "")
				a.Spec.Model = c.override
				s := mode.snap(a)
				s.Definition.Spec.Model = c.defModel
				if c.recipe != nil {
					c.recipe(&s.Definition.Spec)
				}
				if mode.name == "batch with fallback" && ProviderFor(c.override) == "" {
					// Refused for having no batch API, before tool rules.
					return
				}
				p := Decide(s)
				if c.lost == "" {
					if p.CreateJob == nil && p.Submit == nil {
						t.Fatalf("the run did not start: %+v", p.Status)
					}
					return
				}
				wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, c.lost)
				for _, want := range []string{"spec.model " + `"` + c.override + `"`, "AgentDefinition def"} {
					if !strings.Contains(p.Status.FailureReason, want) {
						t.Errorf("the reason does not name %q: %q", want, p.Status.FailureReason)
					}
				}
			})
		}
	}
}

// TestABatchRunWithoutFallbackKeepsNoToolRules: a batch answered by the
// vendor's API runs no CLI and uses no tools, so a model override there
// loses nothing.
func TestABatchRunWithoutFallbackKeepsNoToolRules(t *testing.T) {
	a := agent("a", "")
	a.Spec.Model = "gpt-5"
	s := batchSnap(a, agentsv1alpha1.OnTimeoutFail)
	s.Definition.Spec.DisallowedTools = []string{"WebFetch"}
	if p := Decide(s); p.Submit == nil {
		t.Fatalf("refused: %+v", p.Status)
	}
}

// TestVendorToolRulesMatchTheVendors checks the table the refusal reads
// against what each vendor's command line and config files really carry.
func TestVendorToolRulesMatchTheVendors(t *testing.T) {
	const allowed, denied = "SentinelAllowedTool", "SentinelDeniedTool"
	for _, v := range vendors.All() {
		t.Run(v.Name(), func(t *testing.T) {
			inv := vendors.Invocation{Model: "m", Prompt: "p", AllowedTools: []string{allowed}, DisallowedTools: []string{denied},
				PermissionMode: agentsv1alpha1.PermissionAuto, ExecCommand: []string{"/bin/agent"}}
			argv, err := v.Argv(inv)
			if err != nil {
				t.Fatal(err)
			}
			files, err := v.ConfigFiles(inv)
			if err != nil {
				t.Fatal(err)
			}
			rendered := strings.Join(argv, "\x00")
			for _, f := range files {
				rendered += "\x00" + string(f.Content)
			}
			got := toolRules{allowed: strings.Contains(rendered, allowed), disallowed: strings.Contains(rendered, denied)}
			if want := vendorToolRules[v.Name()]; got != want {
				t.Fatalf("%s carries %+v, the table says %+v", v.Name(), got, want)
			}
		})
	}
}
