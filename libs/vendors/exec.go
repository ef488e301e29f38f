package vendors

import (
	"fmt"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// execV runs the recipe's own program (tool_config.command), which must
// print Claude-style stream-json lines ending with a result line.
type execV struct{}

func (execV) Name() string      { return NameExec }
func (execV) CLI() string       { return "" }
func (execV) CanResume() bool   { return false }
func (execV) StateDir() string  { return "" }
func (execV) NewParser() Parser { return newClaudeParser(NameExec) }

// ConfigFiles is empty: the program gets no vendor configuration.
func (execV) ConfigFiles(Invocation) ([]File, error) { return nil, nil }

// Argv is tool_config.command with the prompt appended as the last
// argument, without "--": the program's own argument rules apply. Tool
// lists, permissions, turns and MCP servers mean nothing to it.
func (execV) Argv(inv Invocation) ([]string, error) {
	if len(inv.ExecCommand) == 0 || inv.ExecCommand[0] == "" {
		return nil, fmt.Errorf("exec vendor: %w", agentsv1alpha1.ErrNoExecCommand)
	}
	if inv.ResumeID != "" {
		return nil, CheckResume(execV{})
	}
	argv := append([]string(nil), inv.ExecCommand...)
	if inv.Prompt != "" {
		argv = append(argv, inv.Prompt)
	}
	return argv, nil
}
