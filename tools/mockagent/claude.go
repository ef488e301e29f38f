package main

// claudeEmitter prints Claude Code `--output-format stream-json` lines.
type claudeEmitter struct {
	session string
	msg     int
}

func (e *claudeEmitter) newSession() string { return newUUID() }

func (e *claudeEmitter) start(session, model, _ string) []any {
	e.session = session
	if model == "" {
		model = "claude-opus-5-5"
	}
	return []any{o("type", "system", "subtype", "init", "cwd", "/workspace", "session_id", session,
		"tools", []string{"Bash", "Edit", "Read", "Write"}, "mcp_servers", []any{}, "model", model,
		"permissionMode", "default", "apiKeySource", "none", "claude_code_version", "2.1.40-mock",
		"output_style", "default", "uuid", newUUID())}
}

func (e *claudeEmitter) message(role string, content []any) obj {
	e.msg++
	m := o("role", role, "content", content)
	if role == "assistant" {
		m = o("id", "msg_mock"+itoa(e.msg), "type", "message", "role", role, "model", "claude-opus-5-5",
			"content", content, "stop_reason", nil, "stop_sequence", nil,
			"usage", o("input_tokens", 4, "output_tokens", 12, "service_tier", "standard"))
	}
	return o("type", role, "message", m, "parent_tool_use_id", nil, "session_id", e.session, "uuid", newUUID())
}

func (e *claudeEmitter) text(s string) any {
	return e.message("assistant", []any{o("type", "text", "text", s)})
}

func (e *claudeEmitter) toolCall(id, name string, input map[string]any) any {
	return e.message("assistant", []any{o("type", "tool_use", "id", "toolu_"+id, "name", name, "input", input)})
}

func (e *claudeEmitter) toolResult(id, _ string, _ map[string]any, output string, isError bool) any {
	return e.message("user", []any{o("tool_use_id", "toolu_"+id, "type", "tool_result", "content", output, "is_error", isError)})
}

func (e *claudeEmitter) result(isError bool, text string, u usage, turns int) []any {
	return []any{o("type", "result", "subtype", "success", "is_error", isError, "duration_ms", 1234,
		"duration_api_ms", 1100, "num_turns", turns, "result", text, "session_id", e.session,
		"total_cost_usd", u.cost, "usage", o("input_tokens", u.in, "cache_creation_input_tokens", u.cacheWrite,
			"cache_read_input_tokens", u.cacheRead, "output_tokens", u.out, "service_tier", "standard"),
		"permission_denials", []any{}, "uuid", newUUID())}
}
