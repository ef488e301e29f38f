package vendors

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

var (
	stdioServer = agentsv1alpha1.MCPServer{Name: "github", Transport: agentsv1alpha1.MCPTransportStdio,
		Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-github"}}
	httpServer = agentsv1alpha1.MCPServer{Name: "lore", Transport: agentsv1alpha1.MCPTransportHTTP,
		URL: "https://lore.example/mcp?a=1&b=2", HeadersSecret: "lore-mcp-auth"}
	sseServer = agentsv1alpha1.MCPServer{Name: "events", Transport: agentsv1alpha1.MCPTransportSSE,
		URL: "https://events.example/sse"}
)

const prompt = "Fix the failing test"

type argvCase struct {
	name string
	inv  Invocation
}

// argvCases are the command-line rules per vendor; each case is named after
// the rule it shows.
var argvCases = map[string][]argvCase{
	NameClaude: {
		{"empty model runs the default model", Invocation{Prompt: prompt}},
		{"auto mode passes one --allowedTools per allowed tool", Invocation{Model: "claude-sonnet-4-6", Prompt: prompt,
			AllowedTools: []string{"Read", "Bash(git diff:*)"}, DisallowedTools: []string{"WebFetch"}}},
		{"bypass skips permissions and still passes disallowed tools", Invocation{Model: "claude-opus-5-5", Prompt: prompt,
			PermissionMode: agentsv1alpha1.PermissionBypass, AllowedTools: []string{"Read"}, DisallowedTools: []string{"WebFetch"}}},
		{"unknown permission mode is auto", Invocation{Prompt: prompt, PermissionMode: "Bypass", AllowedTools: []string{"Read"}}},
		{"mcp servers go inline, strict, headers by env var", Invocation{Prompt: prompt,
			MCPServers: []agentsv1alpha1.MCPServer{stdioServer, httpServer, sseServer}}},
		{"max turns is passed when set", Invocation{Prompt: prompt, MaxTurns: 7}},
		{"resume continues the session", Invocation{Prompt: prompt, ResumeID: "4f1c2a9e-8b7d-4e21-9f3a-1c2d3e4f5a6b"}},
		{"resume with pin forks into the pin", Invocation{Prompt: prompt, ResumeID: "old-id", PinID: "new-id"}},
		{"pin alone starts a session with that id", Invocation{Prompt: prompt, PinID: "new-id"}},
		{"settings path is passed when staged", Invocation{Prompt: prompt, SettingsPath: "/agent/.claude/settings.json"}},
		{"prompt starting with a dash is fenced behind --", Invocation{Prompt: "--help me"}},
		{"empty prompt is left out", Invocation{ResumeID: "sess-1"}},
	},
	NameCodex: {
		{"model is passed without the openai/ prefix", Invocation{Model: "openai/gpt-5-codex", Prompt: prompt}},
		{"empty model leaves the choice to codex", Invocation{Prompt: prompt}},
		{"auto mode sandboxes writes to the workspace", Invocation{Model: "gpt-5", Prompt: prompt}},
		{"bypass disables approvals and sandbox", Invocation{Model: "gpt-5", Prompt: prompt, PermissionMode: agentsv1alpha1.PermissionBypass}},
		{"resume puts options before the subcommand", Invocation{Model: "gpt-5", Prompt: "-next step", ResumeID: "0199a213-81c0-7800-8aa1-bbab2a035a53"}},
		{"tool lists, max turns and pin are not codex flags", Invocation{Model: "o3", Prompt: prompt,
			AllowedTools: []string{"Read"}, DisallowedTools: []string{"WebFetch"}, MaxTurns: 3, PinID: "p"}},
		{"mcp servers go to config.toml", Invocation{Model: "gpt-5", Prompt: prompt,
			MCPServers: []agentsv1alpha1.MCPServer{stdioServer, httpServer}}},
		{"sse mcp server is refused", Invocation{Model: "gpt-5", Prompt: prompt,
			MCPServers: []agentsv1alpha1.MCPServer{sseServer}}},
	},
	NameGemini: {
		{"auto mode passes allowed tools", Invocation{Model: "gemini-3-pro", Prompt: prompt, AllowedTools: []string{"read_file", "run_shell_command(git)"}}},
		{"bypass is yolo", Invocation{Model: "google/gemini-3-flash", Prompt: prompt, PermissionMode: agentsv1alpha1.PermissionBypass}},
		{"resume by session id", Invocation{Model: "gemini-3-pro", Prompt: prompt, ResumeID: "c0ffee00-1234-4abc-9def-0123456789ab", PinID: "ignored"}},
		{"pin without resume sets the session id", Invocation{Model: "gemini-3-pro", Prompt: prompt, PinID: "run-42"}},
		{"prompt is glued to --prompt so a leading dash is data", Invocation{Model: "gemini-3-pro", Prompt: "-v please"}},
		{"denied tools, max turns and mcp servers go to settings.json", Invocation{Model: "gemini-3-pro", Prompt: prompt,
			DisallowedTools: []string{"web_fetch"}, MaxTurns: 12, MCPServers: []agentsv1alpha1.MCPServer{stdioServer, httpServer, sseServer}}},
	},
	NameOpenCode: {
		{"opencode/<provider>/<model> is passed as <provider>/<model>", Invocation{Model: "opencode/anthropic/claude-opus-5-5", Prompt: prompt}},
		{"bare opencode leaves the model to its config", Invocation{Model: "opencode", Prompt: prompt}},
		{"resume uses --session", Invocation{Model: "opencode", Prompt: prompt, ResumeID: "ses_494719016ffe85dkDMj0FPRbHK"}},
		{"denied tools and mcp servers go to opencode.json", Invocation{Model: "opencode", Prompt: prompt,
			DisallowedTools: []string{"webfetch"}, MCPServers: []agentsv1alpha1.MCPServer{stdioServer, httpServer}}},
	},
	NameExec: {
		{"command with the prompt appended last, unfenced", Invocation{Model: "exec", Prompt: "-p x",
			ExecCommand: []string{"/usr/local/bin/my-agent", "--json"}}},
		{"missing command is an error", Invocation{Model: "exec", Prompt: prompt}},
		{"resume is refused", Invocation{Model: "exec", Prompt: prompt, ExecCommand: []string{"a"}, ResumeID: "x"}},
	},
}

// TestArgvGolden renders each vendor's cases into testdata/argv/<vendor>.golden.
func TestArgvGolden(t *testing.T) {
	for _, v := range All() {
		t.Run(v.Name(), func(t *testing.T) {
			var b strings.Builder
			for _, c := range argvCases[v.Name()] {
				fmt.Fprintf(&b, "== %s\n", c.name)
				argv, err := v.Argv(c.inv)
				if err != nil {
					fmt.Fprintf(&b, "argv error: %v\n", err)
				}
				for _, a := range argv {
					fmt.Fprintf(&b, "  %q\n", a)
				}
				files, err := v.ConfigFiles(c.inv)
				if err != nil {
					fmt.Fprintf(&b, "files error: %v\n", err)
				}
				for _, f := range files {
					fmt.Fprintf(&b, "file ~/%s:\n%s\n", f.Path, strings.TrimRight(string(f.Content), "\n"))
				}
			}
			checkGolden(t, "argv/"+v.Name()+".golden", []byte(b.String()))
		})
	}
}

// TestArgvStartsWithCLI checks that every vendor but exec starts its argv
// with its CLI, which the mock agent and PATH lookup rely on.
func TestArgvStartsWithCLI(t *testing.T) {
	for _, v := range All() {
		if v.Name() == NameExec {
			continue
		}
		argv, err := v.Argv(Invocation{Prompt: prompt})
		if err != nil || argv[0] != v.CLI() {
			t.Errorf("%s: argv %q, err %v; want it to start with %q", v.Name(), argv, err, v.CLI())
		}
	}
}

// TestRoute pins the model → vendor rules.
func TestRoute(t *testing.T) {
	tests := []struct{ name, model, want string }{
		{"empty model is claude", "", NameClaude},
		{"claude models are claude", "claude-opus-5-5", NameClaude},
		{"unknown models are claude", "mistral-large", NameClaude},
		{"exactly exec is exec", "exec", NameExec},
		{"exec is matched case-insensitively", " EXEC ", NameExec},
		{"exec as a prefix is not exec", "exec-mode", NameClaude},
		{"opencode anywhere is opencode", "opencode/anthropic/claude-opus-5-5", NameOpenCode},
		{"opencode wins over gemini", "opencode/google/gemini-3-pro", NameOpenCode},
		{"gemini anywhere is gemini", "gemini-3-pro", NameGemini},
		{"google/ gemini is gemini", "google/gemini-3-flash", NameGemini},
		{"codex anywhere is codex", "gpt-5-codex", NameCodex},
		{"gpt prefix is codex", "gpt-5", NameCodex},
		{"o1 prefix is codex", "o1-mini", NameCodex},
		{"o3 prefix is codex", "o3", NameCodex},
		{"o4 prefix is codex", "o4-mini", NameCodex},
		{"openai/ prefix is codex", "openai/gpt-5", NameCodex},
		{"uppercase is matched", "GPT-5", NameCodex},
		{"o2 is not codex", "o2", NameClaude},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Route(tt.model).Name(); got != tt.want {
				t.Errorf("Route(%q) = %s, want %s", tt.model, got, tt.want)
			}
		})
	}
}

// TestCanResume pins which vendors can continue a session; the controller's
// "<vendor> cannot resume a session" reason depends on it.
func TestCanResume(t *testing.T) {
	want := map[string]bool{NameClaude: true, NameCodex: true, NameGemini: true, NameOpenCode: true, NameExec: false}
	for _, v := range All() {
		if v.CanResume() != want[v.Name()] {
			t.Errorf("%s CanResume = %v, want %v", v.Name(), v.CanResume(), want[v.Name()])
		}
		if v.CanResume() != (v.StateDir() != "") {
			t.Errorf("%s: a vendor resumes exactly when it has a state dir to archive", v.Name())
		}
	}
	if _, err := execVendor.Argv(Invocation{ExecCommand: []string{"a"}, ResumeID: "x"}); !errors.Is(err, ErrCannotResume) ||
		err.Error() != "exec cannot resume a session" {
		t.Errorf("exec resume error = %v, want %q", err, "exec cannot resume a session")
	}
	if err := CheckResume(execVendor); err == nil || err.Error() != "exec cannot resume a session" {
		t.Errorf("CheckResume(exec) = %v", err)
	}
	if err := CheckResume(claudeVendor); err != nil {
		t.Errorf("CheckResume(claude) = %v", err)
	}
}

// TestNewInvocation checks how a definition becomes an Invocation.
func TestNewInvocation(t *testing.T) {
	spec := &agentsv1alpha1.AgentDefinitionSpec{
		Prompt: "p", AllowedTools: []string{"Read"}, DisallowedTools: []string{"Bash"}, PermissionMode: "typo", MaxTurns: 4,
		Resources: &agentsv1alpha1.AgentResources{
			MCPServers:   []agentsv1alpha1.MCPServer{stdioServer},
			Conversation: &agentsv1alpha1.ConversationSpec{ID: "c1", Pin: "c2"},
		},
		ToolConfig: &apiextensionsv1.JSON{Raw: []byte(`{"command":["/bin/agent","--x"]}`)},
	}
	t.Run("fields carry over and a bad permission mode is auto", func(t *testing.T) {
		inv, err := NewInvocation(spec, "claude-opus-5-5", "rendered")
		if err != nil {
			t.Fatal(err)
		}
		if inv.Prompt != "rendered" || inv.PermissionMode != agentsv1alpha1.PermissionAuto || inv.MaxTurns != 4 ||
			inv.ResumeID != "c1" || inv.PinID != "c2" || len(inv.MCPServers) != 1 || inv.ExecCommand != nil {
			t.Errorf("invocation = %+v", inv)
		}
	})
	t.Run("exec reads tool_config.command", func(t *testing.T) {
		inv, err := NewInvocation(spec, "exec", "rendered")
		if err != nil || strings.Join(inv.ExecCommand, " ") != "/bin/agent --x" {
			t.Errorf("ExecCommand = %q, err %v", inv.ExecCommand, err)
		}
	})
	t.Run("exec without tool_config.command fails", func(t *testing.T) {
		_, err := NewInvocation(&agentsv1alpha1.AgentDefinitionSpec{Prompt: "p"}, "exec", "x")
		if !errors.Is(err, agentsv1alpha1.ErrNoExecCommand) {
			t.Errorf("err = %v, want ErrNoExecCommand", err)
		}
	})
}

// TestMCPHeaderEnvName pins the env var naming the controller shares.
func TestMCPHeaderEnvName(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"dashes become underscores and letters upper case", "lore-mcp-auth", "LORE_MCP_AUTH"},
		{"dots become underscores", "a.b_c", "A_B_C"},
		{"digits stay", "key2", "KEY2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MCPHeaderEnvName(tt.in); got != tt.want {
				t.Errorf("MCPHeaderEnvName(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
