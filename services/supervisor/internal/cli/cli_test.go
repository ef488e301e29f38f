package cli

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/prompt"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/supervisor/internal/runenv"
)

func load(t *testing.T, spec *runspec.Spec, env map[string]string) (*Plan, error) {
	t.Helper()
	if env == nil {
		env = map[string]string{}
	}
	if spec != nil {
		s, err := runspec.Encode(spec)
		if err != nil {
			t.Fatal(err)
		}
		env[runspec.EnvName] = s
	}
	if env[runspec.EnvHome] == "" {
		env[runspec.EnvHome] = t.TempDir()
	}
	return Load(runenv.Read(func(k string) string { return env[k] }))
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name   string
		spec   *runspec.Spec
		env    map[string]string
		vendor string
		check  func(t *testing.T, argv []string)
	}{
		{name: "the prompt is rendered from the parameters", vendor: "claude",
			spec: &runspec.Spec{Model: "claude-x", Prompt: "fix {issue} in {repo}", Parameters: map[string]string{"issue": "#7"}},
			check: func(t *testing.T, argv []string) {
				if argv[len(argv)-1] != "fix #7 in {repo}" || argv[len(argv)-2] != "--" {
					t.Fatalf("prompt argument %q", argv[len(argv)-2:])
				}
			}},
		{name: "a command without a model is the exec vendor", vendor: "exec",
			spec: &runspec.Spec{Command: []string{"/bin/agent", "--json"}, Prompt: "p"},
			check: func(t *testing.T, argv []string) {
				if !slices.Equal(argv, []string{"/bin/agent", "--json", "p"}) {
					t.Fatalf("argv %q", argv)
				}
			}},
		{name: "the conversation id and pin resume and fork", vendor: "claude",
			spec: &runspec.Spec{Model: "claude-x", Prompt: "p"},
			env:  map[string]string{runspec.EnvConversationID: "old", runspec.EnvConversationPin: "new"},
			check: func(t *testing.T, argv []string) {
				j := strings.Join(argv, " ")
				if !strings.Contains(j, "--resume old --fork-session --session-id new") {
					t.Fatalf("argv %q", j)
				}
			}},
		{name: "an MCP header is referenced by its variable", vendor: "claude",
			spec: &runspec.Spec{Model: "claude-x", Prompt: "p", MCPServers: []runspec.MCPServer{{Name: "lore", Transport: "http", URL: "http://l", HeaderEnv: "LORE_MCP_AUTH"}}},
			check: func(t *testing.T, argv []string) {
				if !strings.Contains(strings.Join(argv, " "), `"Authorization":"${LORE_MCP_AUTH}"`) {
					t.Fatalf("argv %q", argv)
				}
			}},
		{name: "a codex model routes to codex", vendor: "codex", spec: &runspec.Spec{Model: "gpt-5-codex", Prompt: "p"}},
		{name: "a resumed session sends no prompt", vendor: "claude",
			spec: &runspec.Spec{Model: "claude-x", Prompt: "p", ResumeSession: "s1"},
			check: func(t *testing.T, argv []string) {
				if slices.Contains(argv, "p") || !slices.Contains(argv, "s1") {
					t.Fatalf("argv %q", argv)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := load(t, tt.spec, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if p.Vendor.Name() != tt.vendor {
				t.Fatalf("vendor %s, want %s", p.Vendor.Name(), tt.vendor)
			}
			argv, err := p.Argv()
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, argv)
			}
		})
	}
}

func TestLoadUsesStagedSettingsOnlyWhenPresent(t *testing.T) {
	home := t.TempDir()
	spec := &runspec.Spec{Model: "claude-x", Prompt: "p"}
	p, err := load(t, spec, map[string]string{runspec.EnvHome: home})
	if err != nil || p.Invocation.SettingsPath != "" {
		t.Fatalf("settings without a file: %q, %v", p.Invocation.SettingsPath, err)
	}
	f := filepath.Join(home, SettingsFile)
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, _ = load(t, spec, map[string]string{runspec.EnvHome: home}); p.Invocation.SettingsPath != f {
		t.Fatalf("settings %q, want %q", p.Invocation.SettingsPath, f)
	}
}

// TestLoadRefusesUnsafeSessionIDs is the attack of a session id that
// reaches another path of the conversation store ("../team-b/x", fetched
// with the recipe's credentials) or reads as a flag of the CLI ("--..."),
// from an Agent or definition admitted before admission checked it: the
// run refuses to start, naming the field, whatever vendor it runs.
func TestLoadRefusesUnsafeSessionIDs(t *testing.T) {
	realtime := func(model, resume string) *runspec.Spec {
		return &runspec.Spec{Model: model, Prompt: "p", ResumeSession: resume, Execution: runspec.ExecutionRealtime}
	}
	tests := []struct {
		rule string
		spec *runspec.Spec
		env  map[string]string
		want string
	}{
		{"a resumed session climbing out of the store path is refused", realtime("claude-x", "../team-b/x"),
			map[string]string{runspec.EnvConversationID: "../team-b/x"}, "spec.resumeSession"},
		{"a resumed session that is a codex flag is refused", realtime("gpt-5-codex", "--dangerously-bypass-approvals-and-sandbox"),
			map[string]string{runspec.EnvConversationID: "--dangerously-bypass-approvals-and-sandbox"}, "spec.resumeSession"},
		{"a conversation id with a slash is refused", &runspec.Spec{Model: "claude-x", Prompt: "p"},
			map[string]string{runspec.EnvConversationID: "team-b/x"}, "resources.conversation.id"},
		{"a pin starting with a dash is refused", &runspec.Spec{Model: "gemini-3-pro", Prompt: "p"},
			map[string]string{runspec.EnvConversationPin: "-x"}, "resources.conversation.pin"},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			p, err := load(t, tt.spec, tt.env)
			if !errors.Is(err, agentsv1alpha1.ErrInvalidSessionID) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load = %+v, %v; want an ErrInvalidSessionID naming %s", p, err, tt.want)
			}
		})
	}
}

// TestLoadRefusesAPromptOverTheCap: the supervisor renders a Job run's
// prompt itself and applies the controller's cap, so a spec frozen before
// the controller checked it still cannot make the run build a huge prompt.
func TestLoadRefusesAPromptOverTheCap(t *testing.T) {
	spec := &runspec.Spec{Model: "claude-x", Prompt: strings.Repeat("{p}", 4000), Parameters: map[string]string{"p": strings.Repeat("x", 16<<10)}}
	_, err := load(t, spec, nil)
	var tl *prompt.TooLargeError
	if !errors.As(err, &tl) || tl.Limit != prompt.MaxRenderedBytes || !strings.Contains(err.Error(), "render the prompt") {
		t.Fatalf("Load = %v; want the prompt's *TooLargeError", err)
	}
	// A resumed session sends no prompt, so its size does not matter.
	spec.ResumeSession, spec.Execution = "s1", runspec.ExecutionRealtime
	if _, err := load(t, spec, map[string]string{runspec.EnvConversationID: "s1"}); err != nil {
		t.Fatalf("a resumed session was refused for a prompt it does not send: %v", err)
	}
}

func TestLoadRefusesAMissingSpec(t *testing.T) {
	if _, err := load(t, nil, nil); err == nil {
		t.Fatal("no spec accepted")
	}
}

func TestStartFresh(t *testing.T) {
	tests := []struct {
		name       string
		spec       *runspec.Spec
		env        map[string]string
		marker     bool
		wantResume string
		wantPin    string
		wantFresh  bool
	}{
		{name: "the skip marker clears the conversation to resume and keeps the pin",
			spec: &runspec.Spec{Model: "claude-x", Prompt: "p"}, marker: true, wantFresh: true, wantPin: "new",
			env: map[string]string{runspec.EnvConversationID: "old", runspec.EnvConversationPin: "new"}},
		{name: "without the marker the conversation is resumed",
			spec: &runspec.Spec{Model: "claude-x", Prompt: "p"}, wantResume: "old", wantPin: "new",
			env: map[string]string{runspec.EnvConversationID: "old", runspec.EnvConversationPin: "new"}},
		{name: "a resumed realtime session starts fresh with the marker and still sends no prompt",
			spec:   &runspec.Spec{Model: "claude-x", Prompt: "p", ResumeSession: "s1", Execution: runspec.ExecutionRealtime},
			env:    map[string]string{runspec.EnvConversationID: "s1"},
			marker: true, wantFresh: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := load(t, tt.spec, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			agentDir := t.TempDir()
			if tt.marker {
				f := filepath.Join(agentDir, ConversationSkippedFile)
				if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, []byte("store down\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := p.StartFresh(agentDir); got != tt.wantFresh {
				t.Fatalf("StartFresh = %v, want %v", got, tt.wantFresh)
			}
			inv := p.Invocation
			if inv.ResumeID != tt.wantResume || inv.PinID != tt.wantPin {
				t.Fatalf("resume %q pin %q, want %q %q", inv.ResumeID, inv.PinID, tt.wantResume, tt.wantPin)
			}
			if tt.spec.ResumeSession != "" && inv.Prompt != "" {
				t.Fatalf("a resumed session sends no initial prompt, got %q", inv.Prompt)
			}
			argv, err := p.Argv()
			if err != nil {
				t.Fatal(err)
			}
			if j := strings.Join(argv, " "); strings.Contains(j, "--resume") == tt.wantFresh {
				t.Fatalf("argv %q", j)
			}
		})
	}
}
