package vendors

import (
	"encoding/json"
	"fmt"
	"strings"
)

// gemini drives the Gemini CLI: `gemini --output-format stream-json`.
type gemini struct{}

func (gemini) Name() string      { return NameGemini }
func (gemini) CLI() string       { return "gemini" }
func (gemini) CanResume() bool   { return true }
func (gemini) StateDir() string  { return ".gemini/tmp" }
func (gemini) NewParser() Parser { return &geminiParser{stream: stream{vendor: NameGemini}} }

// Argv builds the Gemini CLI command line. The prompt is passed as
// --prompt=<text>: glued to its flag, a prompt that starts with a dash is
// still read as the value. Denied tools, the turn cap and MCP servers have
// no flags; they go to settings.json (ConfigFiles).
func (gemini) Argv(inv Invocation) ([]string, error) {
	argv := []string{"gemini", "--output-format", "stream-json"}
	if m := stripPrefix(inv.Model, "google/"); m != "" {
		argv = append(argv, "--model", m)
	}
	if inv.bypass() {
		argv = append(argv, "--approval-mode", "yolo")
	} else {
		argv = append(argv, "--approval-mode", "default")
		for _, t := range inv.AllowedTools {
			argv = append(argv, "--allowed-tools", t)
		}
	}
	if inv.ResumeID != "" {
		argv = append(argv, "--resume", inv.ResumeID)
	} else if inv.PinID != "" {
		// A new session under a chosen id; Gemini cannot fork into one.
		argv = append(argv, "--session-id", inv.PinID)
	}
	if inv.Prompt != "" {
		argv = append(argv, "--prompt="+inv.Prompt)
	}
	return argv, nil
}

// geminiSettings is the part of ~/.gemini/settings.json a run sets.
type geminiSettings struct {
	MCPServers map[string]geminiMCPServer `json:"mcpServers,omitempty"`
	Tools      *struct {
		Exclude []string `json:"exclude"`
	} `json:"tools,omitempty"`
	Model *struct {
		MaxSessionTurns int32 `json:"maxSessionTurns"`
	} `json:"model,omitempty"`
}

// ConfigFiles returns ~/.gemini/settings.json when the run has MCP
// servers, denied tools or a turn cap, which Gemini takes only from there.
func (gemini) ConfigFiles(inv Invocation) ([]File, error) {
	var s geminiSettings
	if len(inv.MCPServers) > 0 {
		s.MCPServers = geminiMCPServers(inv.MCPServers)
	}
	if len(inv.DisallowedTools) > 0 {
		s.Tools = &struct {
			Exclude []string `json:"exclude"`
		}{Exclude: inv.DisallowedTools}
	}
	if inv.MaxTurns > 0 {
		s.Model = &struct {
			MaxSessionTurns int32 `json:"maxSessionTurns"`
		}{MaxSessionTurns: inv.MaxTurns}
	}
	if s.MCPServers == nil && s.Tools == nil && s.Model == nil {
		return nil, nil
	}
	b, err := marshalJSON(s)
	if err != nil {
		return nil, fmt.Errorf("rendering gemini settings: %w", err)
	}
	return []File{{Path: ".gemini/settings.json", Content: append(b, '\n')}}, nil
}

// geminiLine is every field of a Gemini stream-json line the parser reads.
type geminiLine struct {
	Type       string          `json:"type"`
	SessionID  string          `json:"session_id"`
	Role       string          `json:"role"`
	Content    textContent     `json:"content"`
	ToolName   string          `json:"tool_name"`
	ToolID     string          `json:"tool_id"`
	Parameters json.RawMessage `json:"parameters"`
	Status     string          `json:"status"`
	Output     string          `json:"output"`
	Severity   string          `json:"severity"`
	Message    string          `json:"message"`
	Error      *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *struct {
		InputTokens  int64  `json:"input_tokens"`
		OutputTokens int64  `json:"output_tokens"`
		Cached       int64  `json:"cached"`
		Input        *int64 `json:"input"`
		DurationMS   int64  `json:"duration_ms"`
	} `json:"stats"`
}

type geminiParser struct {
	stream
	line geminiLine
	// answer collects the assistant's deltas: Gemini's result has no text.
	answer strings.Builder
}

// Parse implements Parser.
func (p *geminiParser) Parse(line []byte) ([]Event, error) {
	return parseWith(&p.stream, line, &p.line, p.classify)
}

func (p *geminiParser) classify(l *geminiLine) {
	switch l.Type {
	case "init":
		// The only line with the session id; the parser carries it on.
		p.setSession(l.SessionID)
	case "message":
		role := l.Role
		if role == "" {
			role = "assistant"
		}
		if role == "assistant" {
			p.answer.WriteString(string(l.Content))
		}
		p.emit(Event{Kind: KindMessage, Role: role, Text: string(l.Content)})
	case "tool_use":
		p.emit(Event{Kind: KindToolCall, ToolID: l.ToolID, ToolName: l.ToolName, ToolInput: l.Parameters})
	case "tool_result":
		e := Event{Kind: KindToolResult, ToolID: l.ToolID, Text: l.Output, IsError: l.Status == "error"}
		if l.Error != nil && e.Text == "" {
			e.Text = l.Error.Message
		}
		p.emit(e)
	case "error":
		p.emit(Event{Kind: KindMessage, Role: "system", Text: l.Message, IsError: l.Severity != "warning"})
	case "result":
		p.result(l)
	}
}

func (p *geminiParser) result(l *geminiLine) {
	e := Event{Kind: KindResult, IsError: l.Status != "success", Text: p.answer.String()}
	if l.Error != nil && l.Error.Message != "" {
		e.Text = l.Error.Message
	}
	if st := l.Stats; st != nil {
		e.DurationMS = st.DurationMS
		// input_tokens includes cached ones; "input" is the uncached part
		// when the CLI reports it.
		in := st.InputTokens - st.Cached
		if st.Input != nil {
			in = *st.Input
		}
		e.Usage = Usage{InputTokens: nonNegative(in), OutputTokens: st.OutputTokens, CacheReadTokens: st.Cached}
		p.emit(Event{Kind: KindUsage, Usage: e.Usage})
	}
	p.emit(e)
}
