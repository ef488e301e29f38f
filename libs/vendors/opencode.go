package vendors

import (
	"encoding/json"
	"fmt"
	"strings"
)

// openCode drives OpenCode: `opencode run --format json`.
type openCode struct{}

func (openCode) Name() string      { return NameOpenCode }
func (openCode) CLI() string       { return "opencode" }
func (openCode) CanResume() bool   { return true }
func (openCode) StateDir() string  { return ".local/share/opencode" }
func (openCode) NewParser() Parser { return &openCodeParser{stream: stream{vendor: NameOpenCode}} }

// Argv builds the OpenCode command line. A model "opencode/<provider>/<m>"
// is passed as "<provider>/<m>"; the bare "opencode" leaves the choice to
// OpenCode's config. `opencode run` asks no questions, so the permission
// mode and allowed tools have no flag; denied tools and MCP servers go to
// opencode.json (ConfigFiles). OpenCode has no turn cap or chosen session id.
func (openCode) Argv(inv Invocation) ([]string, error) {
	argv := []string{"opencode", "run", "--format", "json"}
	m := inv.Model
	if strings.EqualFold(m, "opencode") {
		m = ""
	}
	if m = stripPrefix(m, "opencode/"); m != "" {
		argv = append(argv, "--model", m)
	}
	if inv.ResumeID != "" {
		argv = append(argv, "--session", inv.ResumeID)
	}
	return withPrompt(argv, inv.Prompt), nil
}

// ConfigFiles returns ~/.config/opencode/opencode.json when the run has MCP
// servers or denied tools.
func (openCode) ConfigFiles(inv Invocation) ([]File, error) {
	if len(inv.MCPServers) == 0 && len(inv.DisallowedTools) == 0 {
		return nil, nil
	}
	cfg := struct {
		Schema string                       `json:"$schema"`
		MCP    map[string]openCodeMCPServer `json:"mcp,omitempty"`
		Tools  map[string]bool              `json:"tools,omitempty"`
	}{Schema: "https://opencode.ai/config.json"}
	if len(inv.MCPServers) > 0 {
		cfg.MCP = openCodeMCPServers(inv.MCPServers)
	}
	if len(inv.DisallowedTools) > 0 {
		cfg.Tools = make(map[string]bool, len(inv.DisallowedTools))
		for _, t := range inv.DisallowedTools {
			cfg.Tools[t] = false
		}
	}
	b, err := marshalJSON(cfg)
	if err != nil {
		return nil, fmt.Errorf("rendering opencode config: %w", err)
	}
	return []File{{Path: ".config/opencode/opencode.json", Content: append(b, '\n')}}, nil
}

// openCodeLine is every field of an `opencode run --format json` line the
// parser reads.
type openCodeLine struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionID"`
	Part      struct {
		Type   string `json:"type"`
		Text   string `json:"text"`
		CallID string `json:"callID"`
		Tool   string `json:"tool"`
		State  struct {
			Status string          `json:"status"`
			Input  json.RawMessage `json:"input"`
			Output string          `json:"output"`
			Error  string          `json:"error"`
		} `json:"state"`
		Reason string   `json:"reason"`
		Cost   *float64 `json:"cost"`
		Tokens *struct {
			Input     int64 `json:"input"`
			Output    int64 `json:"output"`
			Reasoning int64 `json:"reasoning"`
			Cache     struct {
				Read  int64 `json:"read"`
				Write int64 `json:"write"`
			} `json:"cache"`
		} `json:"tokens"`
	} `json:"part"`
	Error *struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
	} `json:"error"`
}

type openCodeParser struct {
	stream
	line openCodeLine
	// answer is the text of the current step; the final step's is the result.
	answer strings.Builder
	// cost adds up the steps: OpenCode reports cost per step only.
	cost    float64
	hasCost bool
}

// Parse implements Parser.
func (p *openCodeParser) Parse(line []byte) ([]Event, error) {
	return parseWith(&p.stream, line, &p.line, p.classify)
}

func (p *openCodeParser) classify(l *openCodeLine) {
	p.setSession(l.SessionID)
	switch l.Type {
	case "step_start":
		p.answer.Reset()
	case "text":
		p.answer.WriteString(l.Part.Text)
		p.emit(Event{Kind: KindMessage, Role: "assistant", Text: l.Part.Text})
	case "tool_use":
		st := &l.Part.State
		p.emit(Event{Kind: KindToolCall, ToolID: l.Part.CallID, ToolName: l.Part.Tool, ToolInput: st.Input})
		switch st.Status {
		case "completed":
			p.emit(Event{Kind: KindToolResult, ToolID: l.Part.CallID, Text: st.Output})
		case "error":
			p.emit(Event{Kind: KindToolResult, ToolID: l.Part.CallID, Text: st.Error, IsError: true})
		}
	case "step_finish":
		p.stepFinish(l)
	case "error":
		// OpenCode prints this and exits non-zero; it is the run's end.
		msg := "error"
		if l.Error != nil {
			msg = l.Error.Name
			if l.Error.Data.Message != "" {
				msg = l.Error.Data.Message
			}
		}
		p.emit(Event{Kind: KindResult, IsError: true, Text: msg})
	}
}

// stepFinish reports the step's usage; a step that stopped without asking
// for tools is the last one, so it also yields the result.
func (p *openCodeParser) stepFinish(l *openCodeLine) {
	var u Usage
	if t := l.Part.Tokens; t != nil {
		// Reasoning tokens are generated, and billed, as output.
		u = Usage{InputTokens: t.Input, OutputTokens: t.Output + t.Reasoning,
			CacheReadTokens: t.Cache.Read, CacheCreationTokens: t.Cache.Write}
	}
	if l.Part.Cost != nil {
		u.CostUSD, u.HasCost = *l.Part.Cost, true
		p.cost, p.hasCost = p.cost+*l.Part.Cost, true
	}
	p.emit(Event{Kind: KindUsage, Usage: u})
	if l.Part.Reason == "stop" {
		r := Event{Kind: KindResult, Text: p.answer.String()}
		r.Usage.CostUSD, r.Usage.HasCost = p.cost, p.hasCost
		p.emit(r)
	}
}
