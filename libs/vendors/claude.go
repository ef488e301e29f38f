package vendors

import (
	"encoding/json"
	"strconv"
	"strings"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// claude drives Claude Code: `claude --print --output-format stream-json`.
type claude struct{}

func (claude) Name() string      { return NameClaude }
func (claude) CLI() string       { return "claude" }
func (claude) CanResume() bool   { return true }
func (claude) StateDir() string  { return ".claude/projects" }
func (claude) NewParser() Parser { return newClaudeParser(NameClaude) }

// ConfigFiles is empty: MCP servers travel inline with --mcp-config.
func (claude) ConfigFiles(Invocation) ([]File, error) { return nil, nil }

// Argv builds the Claude Code command line. --verbose is required: with
// --print, stream-json output refuses to start without it.
func (claude) Argv(inv Invocation) ([]string, error) {
	model := inv.Model
	if model == "" {
		model = agentsv1alpha1.DefaultModel
	}
	argv := []string{"claude", "--print", "--verbose", "--output-format", "stream-json", "--model", model}
	if inv.bypass() {
		argv = append(argv, "--dangerously-skip-permissions")
	} else {
		for _, t := range inv.AllowedTools {
			argv = append(argv, "--allowedTools", t)
		}
	}
	// Denied tools apply in bypass too; bypass must not lift a denial.
	for _, t := range inv.DisallowedTools {
		argv = append(argv, "--disallowedTools", t)
	}
	if len(inv.MCPServers) > 0 {
		cfg, err := claudeMCPConfig(inv.MCPServers)
		if err != nil {
			return nil, err
		}
		// Strict: only the recipe's servers, none from files in the repo.
		argv = append(argv, "--mcp-config", cfg, "--strict-mcp-config")
	}
	if inv.SettingsPath != "" {
		argv = append(argv, "--settings", inv.SettingsPath)
	}
	if inv.MaxTurns > 0 {
		argv = append(argv, "--max-turns", strconv.Itoa(int(inv.MaxTurns)))
	}
	if inv.ResumeID != "" {
		argv = append(argv, "--resume", inv.ResumeID)
		if inv.PinID != "" {
			// Claude rejects --resume with --session-id unless forking.
			argv = append(argv, "--fork-session")
		}
	}
	if inv.PinID != "" {
		argv = append(argv, "--session-id", inv.PinID)
	}
	return withPrompt(argv, inv.Prompt), nil
}

// claudeLine is every field of a Claude Code stream-json line the parser
// reads; one decode fills it whatever the line's type.
type claudeLine struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	Message   struct {
		Role    string        `json:"role"`
		Content claudeContent `json:"content"`
	} `json:"message"`
	IsError    bool         `json:"is_error"`
	Result     string       `json:"result"`
	Errors     []string     `json:"errors"`
	NumTurns   int32        `json:"num_turns"`
	DurationMS int64        `json:"duration_ms"`
	TotalCost  *float64     `json:"total_cost_usd"`
	Usage      *claudeUsage `json:"usage"`
}

type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// claudeContent is message.content: a string, or a list of blocks.
type claudeContent struct {
	text   string
	blocks []claudeBlock
}

type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   textContent     `json:"content"`
	IsError   bool            `json:"is_error"`
}

// UnmarshalJSON accepts both shapes of message.content. A block field of an
// unexpected type is left empty rather than failing the line, whose
// session id comes after the message.
func (c *claudeContent) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return tolerate(unmarshal(b, &c.text))
	}
	if len(b) > 0 && b[0] == '[' {
		return tolerate(unmarshal(b, &c.blocks))
	}
	return nil
}

// claudeParser also serves exec, whose programs print Claude-style lines.
type claudeParser struct {
	stream
	line claudeLine
}

func newClaudeParser(vendor string) *claudeParser {
	return &claudeParser{stream: stream{vendor: vendor}}
}

// Parse implements Parser.
func (p *claudeParser) Parse(line []byte) ([]Event, error) {
	return parseWith(&p.stream, line, &p.line, p.classify)
}

func (p *claudeParser) classify(l *claudeLine) {
	p.setSession(l.SessionID)
	switch l.Type {
	case "assistant", "user":
		role := l.Message.Role
		if role == "" {
			role = l.Type
		}
		p.content(role, &l.Message.Content)
	case "result":
		p.result(l)
	}
}

// content emits a message per run of text blocks and one event per tool
// block, keeping their order. Thinking blocks are the model's scratchpad
// and are not surfaced.
func (p *claudeParser) content(role string, c *claudeContent) {
	if c.text != "" {
		p.emit(Event{Kind: KindMessage, Role: role, Text: c.text})
	}
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			p.emit(Event{Kind: KindMessage, Role: role, Text: text.String()})
			text.Reset()
		}
	}
	for i := range c.blocks {
		b := &c.blocks[i]
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use", "server_tool_use", "mcp_tool_use":
			flush()
			p.emit(Event{Kind: KindToolCall, ToolID: b.ID, ToolName: b.Name, ToolInput: b.Input})
		case "tool_result":
			flush()
			p.emit(Event{Kind: KindToolResult, ToolID: b.ToolUseID, Text: string(b.Content), IsError: b.IsError})
		}
	}
	flush()
}

// result emits the result and, when the line carries totals, a usage event.
// A result is a failure only when is_error is true, whatever the subtype.
func (p *claudeParser) result(l *claudeLine) {
	e := Event{Kind: KindResult, IsError: l.IsError, Text: l.Result, NumTurns: l.NumTurns, DurationMS: l.DurationMS}
	if e.Text == "" && len(l.Errors) > 0 {
		e.Text = strings.Join(l.Errors, "; ")
	}
	if e.Text == "" && l.IsError {
		e.Text = l.Subtype
	}
	if l.TotalCost != nil {
		e.Usage.CostUSD, e.Usage.HasCost = *l.TotalCost, true
	}
	if u := l.Usage; u != nil {
		e.Usage.InputTokens, e.Usage.OutputTokens = u.InputTokens, u.OutputTokens
		e.Usage.CacheReadTokens, e.Usage.CacheCreationTokens = u.CacheReadInputTokens, u.CacheCreationInputTokens
	}
	if l.Usage != nil || l.TotalCost != nil {
		p.emit(Event{Kind: KindUsage, Usage: e.Usage})
	}
	p.emit(e)
}
