// Package vendors knows the agent CLIs a run can drive: which one a model
// routes to, the argv and config files that start it, and how to read its
// JSON event lines into one event model shared by every vendor.
//
// The package is pure: it builds argv and file contents and parses lines;
// writing files and running processes is left to the caller.
package vendors

import (
	"errors"
	"fmt"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// Vendor names, as they appear in RunEvent.vendor and in validation reasons.
const (
	// NameClaude is Anthropic's Claude Code CLI.
	NameClaude = "claude"
	// NameCodex is OpenAI's Codex CLI.
	NameCodex = "codex"
	// NameGemini is Google's Gemini CLI.
	NameGemini = "gemini"
	// NameOpenCode is the OpenCode CLI.
	NameOpenCode = "opencode"
	// NameExec is the recipe's own program, from tool_config.command.
	NameExec = "exec"
)

// Vendor is one agent CLI.
type Vendor interface {
	// Name is the vendor's name (NameClaude, ...).
	Name() string
	// CLI is the executable the argv starts with; for exec it is empty
	// because the program comes from tool_config.command.
	CLI() string
	// Argv returns the command line that runs inv, program first.
	Argv(inv Invocation) ([]string, error)
	// ConfigFiles returns files that must exist under HOME before the CLI
	// starts (MCP servers, settings the CLI takes no flag for). Nil when
	// the vendor needs none for inv.
	ConfigFiles(inv Invocation) ([]File, error)
	// NewParser returns a parser for one run's stream of event lines.
	NewParser() Parser
	// CanResume reports whether the CLI can continue an earlier session by
	// its id. The controller refuses resumeSession for a vendor that cannot.
	CanResume() bool
	// StateDir is where the CLI keeps its sessions, relative to HOME; the
	// conversation archive saves and restores it. Empty when there is none.
	StateDir() string
}

// Invocation is everything a vendor needs to build its command line.
type Invocation struct {
	// Model is the model the run uses; empty means the vendor's default.
	Model string
	// Prompt is the rendered prompt. Empty leaves the prompt argument out
	// (a resumed realtime session has no initial prompt); claude and codex
	// then read the prompt from stdin, so give them an empty one or start
	// them only once there is a prompt.
	Prompt string
	// AllowedTools may be used without asking in PermissionAuto.
	AllowedTools []string
	// DisallowedTools may never be used, in any permission mode.
	DisallowedTools []string
	// PermissionMode is auto (the default) or bypass.
	PermissionMode agentsv1alpha1.PermissionMode
	// MaxTurns caps the conversation's turns; 0 means no cap.
	MaxTurns int32
	// MCPServers are offered to the agent.
	MCPServers []agentsv1alpha1.MCPServer
	// ResumeID is the session to continue, if any.
	ResumeID string
	// PinID is the id to save the continued (or new) session under, for the
	// vendors that let the caller choose it.
	PinID string
	// ExecCommand is tool_config.command, the program of the exec vendor.
	ExecCommand []string
	// SettingsPath is a settings file staged by the init step that the CLI
	// should load (claude's --settings); empty leaves it out.
	SettingsPath string
}

// NewInvocation fills an Invocation from an AgentDefinition's spec, the
// run's effective model and its rendered prompt. The conversation id and pin
// become ResumeID and PinID; a caller resuming a realtime session overrides
// ResumeID. tool_config.command is read only when the model routes to exec,
// and its error (wrapping agentsv1alpha1.ErrNoExecCommand) is returned then.
func NewInvocation(spec *agentsv1alpha1.AgentDefinitionSpec, model, prompt string) (Invocation, error) {
	inv := Invocation{
		Model:           model,
		Prompt:          prompt,
		AllowedTools:    spec.AllowedTools,
		DisallowedTools: spec.DisallowedTools,
		PermissionMode:  spec.EffectivePermissionMode(),
		MaxTurns:        spec.MaxTurns,
	}
	if r := spec.Resources; r != nil {
		inv.MCPServers = r.MCPServers
		if c := r.Conversation; c != nil {
			inv.ResumeID, inv.PinID = c.ID, c.Pin
		}
	}
	if Route(model).Name() == NameExec {
		cmd, err := spec.ExecCommand()
		if err != nil {
			return inv, err
		}
		inv.ExecCommand = cmd
	}
	return inv, nil
}

// File is a config file a vendor needs before its CLI starts.
type File struct {
	// Path is relative to the run's HOME.
	Path string
	// Content is the whole file. It names secrets only by environment
	// variable, never by value.
	Content []byte
}

// ErrCannotResume is returned by Argv when a vendor that cannot resume is
// asked to; its message is the controller's validation reason.
var ErrCannotResume = errors.New("cannot resume a session")

// bypass reports whether inv asks for bypass; anything else is auto, so a
// typo never widens permissions.
func (inv Invocation) bypass() bool {
	return inv.PermissionMode == agentsv1alpha1.PermissionBypass
}

// withPrompt appends the prompt behind "--" so a prompt that starts with a
// dash is read as data, not as a flag.
func withPrompt(argv []string, prompt string) []string {
	if prompt == "" {
		return argv
	}
	return append(argv, "--", prompt)
}

// CheckResume returns nil when v can continue a session, else an error
// wrapping ErrCannotResume whose text, "<vendor> cannot resume a session",
// is the controller's validation reason.
func CheckResume(v Vendor) error {
	if v.CanResume() {
		return nil
	}
	return fmt.Errorf("%s %w", v.Name(), ErrCannotResume)
}
