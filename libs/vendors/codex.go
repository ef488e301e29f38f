package vendors

import (
	"encoding/json"
)

// codex drives the OpenAI Codex CLI: `codex exec --json`.
type codex struct{}

func (codex) Name() string      { return NameCodex }
func (codex) CLI() string       { return "codex" }
func (codex) CanResume() bool   { return true }
func (codex) StateDir() string  { return ".codex/sessions" }
func (codex) NewParser() Parser { return &codexParser{stream: stream{vendor: NameCodex}} }

// Argv builds the Codex command line. Options go before the resume
// subcommand, where codex accepts them whether or not they are global.
// Codex has no tool lists, turn cap or caller-chosen session id, so
// AllowedTools, DisallowedTools, MaxTurns and PinID are not used.
func (codex) Argv(inv Invocation) ([]string, error) {
	// --skip-git-repo-check: the workspace need not be a git repository.
	argv := []string{"codex", "exec", "--json", "--skip-git-repo-check"}
	if m := stripPrefix(inv.Model, "openai/"); m != "" {
		argv = append(argv, "--model", m)
	}
	if inv.bypass() {
		argv = append(argv, "--dangerously-bypass-approvals-and-sandbox")
	} else {
		// auto: the agent may change the workspace, nothing outside it.
		argv = append(argv, "--sandbox", "workspace-write")
	}
	if inv.ResumeID != "" {
		argv = append(argv, "resume", inv.ResumeID)
	}
	return withPrompt(argv, inv.Prompt), nil
}

// ConfigFiles returns ~/.codex/config.toml with the MCP servers, which
// codex reads only from its config.
func (codex) ConfigFiles(inv Invocation) ([]File, error) {
	if len(inv.MCPServers) == 0 {
		return nil, nil
	}
	b, err := codexMCPConfig(inv.MCPServers)
	if err != nil {
		return nil, err
	}
	return []File{{Path: ".codex/config.toml", Content: b}}, nil
}

// codexLine is every field of a `codex exec --json` line the parser reads.
type codexLine struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Message  string `json:"message"`
	Usage    *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Item codexItem `json:"item"`
}

type codexItem struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Command          string          `json:"command"`
	AggregatedOutput string          `json:"aggregated_output"`
	ExitCode         *int            `json:"exit_code"`
	Status           string          `json:"status"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Changes          json.RawMessage `json:"changes"`
	Query            string          `json:"query"`
	Result           *struct {
		Content textContent `json:"content"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Message string `json:"message"`
}

type codexParser struct {
	stream
	line codexLine
	// answer is the last agent_message: Codex's result line has no text.
	answer string
}

// Parse implements Parser.
func (p *codexParser) Parse(line []byte) ([]Event, error) {
	return parseWith(&p.stream, line, &p.line, p.classify)
}

func (p *codexParser) classify(l *codexLine) {
	switch l.Type {
	case "thread.started":
		p.setSession(l.ThreadID)
	case "item.completed":
		p.item(&l.Item)
	case "turn.completed":
		var u Usage
		if l.Usage != nil {
			// Codex counts cached tokens inside input_tokens.
			u.InputTokens = nonNegative(l.Usage.InputTokens - l.Usage.CachedInputTokens)
			u.CacheReadTokens, u.OutputTokens = l.Usage.CachedInputTokens, l.Usage.OutputTokens
			p.emit(Event{Kind: KindUsage, Usage: u})
		}
		p.emit(Event{Kind: KindResult, Text: p.answer, Usage: u})
	case "turn.failed":
		msg := "turn failed"
		if l.Error != nil && l.Error.Message != "" {
			msg = l.Error.Message
		}
		p.emit(Event{Kind: KindResult, IsError: true, Text: msg})
	case "error":
		p.emit(Event{Kind: KindMessage, Role: "system", Text: l.Message, IsError: true})
	}
}

func (p *codexParser) item(it *codexItem) {
	switch it.Type {
	case "agent_message":
		p.answer = it.Text
		p.emit(Event{Kind: KindMessage, Role: "assistant", Text: it.Text})
	case "command_execution":
		failed := it.Status == "failed" || it.Status == "declined" || (it.ExitCode != nil && *it.ExitCode != 0)
		p.emit(Event{Kind: KindToolCall, ToolID: it.ID, ToolName: it.Type, ToolInput: objectOf("command", it.Command)})
		p.emit(Event{Kind: KindToolResult, ToolID: it.ID, Text: it.AggregatedOutput, IsError: failed})
	case "mcp_tool_call":
		p.emit(Event{Kind: KindToolCall, ToolID: it.ID, ToolName: it.Tool, ToolInput: it.Arguments})
		r := Event{Kind: KindToolResult, ToolID: it.ID, IsError: it.Status == "failed"}
		if it.Result != nil {
			r.Text = string(it.Result.Content)
		}
		if it.Error != nil {
			r.IsError, r.Text = true, it.Error.Message
		}
		p.emit(r)
	case "file_change":
		p.emit(Event{Kind: KindToolCall, ToolID: it.ID, ToolName: it.Type, ToolInput: objectOfRaw("changes", it.Changes)})
		p.emit(Event{Kind: KindToolResult, ToolID: it.ID, Text: it.Status, IsError: it.Status == "failed"})
	case "web_search":
		p.emit(Event{Kind: KindToolCall, ToolID: it.ID, ToolName: it.Type, ToolInput: objectOf("query", it.Query)})
	case "error":
		p.emit(Event{Kind: KindMessage, Role: "system", Text: it.Message, IsError: true})
	}
}

// objectOf wraps a string argument as {"key": value}, the shape ToolCall
// input must have.
func objectOf(key, value string) json.RawMessage {
	v, _ := json.Marshal(value) // a string always marshals
	return objectOfRaw(key, v)
}

func objectOfRaw(key string, value json.RawMessage) json.RawMessage {
	if len(value) == 0 {
		return nil
	}
	k, _ := json.Marshal(key)
	out := make([]byte, 0, len(k)+len(value)+3)
	out = append(out, '{')
	out = append(out, k...)
	out = append(out, ':')
	out = append(out, value...)
	return append(out, '}')
}
