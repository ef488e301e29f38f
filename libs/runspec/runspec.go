// Package runspec is the contract between the agent-controller, which builds
// a run's Job, and the supervisor, which runs the vendor CLI inside it: what
// to run, passed as one JSON environment variable (Spec), and the rest of
// the run pod's environment (Env), with every variable's name and the
// defaults both sides rely on.
//
// The controller resolves the recipe (the AgentDefinition, the Agent's
// overrides) at Job build time and freezes it here, so a later edit of the
// definition never changes a run that already started. The supervisor
// renders the prompt and builds the CLI's argv from it.
package runspec

import (
	"encoding/json"
	"errors"
	"fmt"
)

// EnvName is the environment variable holding the encoded Spec.
const EnvName = "AGENT_RUN_SPEC"

// MaxEncodedBytes bounds a Spec. Environment variables share the pod's
// argument space (ARG_MAX) with the rest of the env, so a recipe whose prompt
// would not fit is refused when the Job is built, with a reason, instead of
// failing at exec time inside the pod.
const MaxEncodedBytes = 512 << 10

// MCPServer is an MCP server offered to the agent.
type MCPServer struct {
	// Name the agent knows the server by.
	Name string `json:"name"`
	// Transport is stdio, http or sse.
	Transport string `json:"transport"`
	// Command and Args start a stdio server.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// URL of an http or sse server.
	URL string `json:"url,omitempty"`
	// HeaderEnv names the environment variable holding the server's
	// Authorization header value (never the value itself).
	HeaderEnv string `json:"header_env,omitempty"`
}

// Spec is everything the supervisor needs to start the vendor CLI.
type Spec struct {
	// Model routes to the vendor and is passed to its CLI.
	Model string `json:"model"`
	// Prompt is the recipe's prompt template, {name} placeholders unrendered.
	Prompt string `json:"prompt"`
	// Parameters fill the placeholders.
	Parameters map[string]string `json:"parameters,omitempty"`
	// AllowedTools and DisallowedTools are passed to CLIs that support them.
	AllowedTools    []string `json:"allowed_tools,omitempty"`
	DisallowedTools []string `json:"disallowed_tools,omitempty"`
	// PermissionMode is auto or bypass.
	PermissionMode string `json:"permission_mode"`
	// MaxTurns caps agent turns; 0 is uncapped.
	MaxTurns int32 `json:"max_turns,omitempty"`
	// MCPServers are offered to the agent.
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`
	// Command is the exec vendor's argv (tool_config.command).
	Command []string `json:"command,omitempty"`
	// Execution is job or realtime.
	Execution string `json:"execution"`
	// ResumeSession is a vendor session to resume instead of sending the prompt.
	ResumeSession string `json:"resume_session,omitempty"`
}

// Encode returns the JSON for EnvName, refusing specs over MaxEncodedBytes.
func Encode(s *Spec) (string, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encode run spec: %w", err)
	}
	if len(raw) > MaxEncodedBytes {
		return "", fmt.Errorf("run spec is %d bytes, over the %d-byte limit: shorten the prompt or parameters", len(raw), MaxEncodedBytes)
	}
	return string(raw), nil
}

// Decode parses the JSON of EnvName.
func Decode(raw string) (*Spec, error) {
	if raw == "" {
		return nil, errors.New(EnvName + " is empty")
	}
	var s Spec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return nil, fmt.Errorf("decode %s: %w", EnvName, err)
	}
	if s.Model == "" && len(s.Command) == 0 {
		return nil, fmt.Errorf("%s names neither a model nor a command", EnvName)
	}
	return &s, nil
}
