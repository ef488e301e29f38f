package main

// codexEmitter prints `codex exec --json` lines.
type codexEmitter struct {
	item int
}

func (e *codexEmitter) newSession() string { return newUUID() }

func (e *codexEmitter) nextID() string {
	id := "item_" + itoa(e.item)
	e.item++
	return id
}

func (e *codexEmitter) start(session, _, _ string) []any {
	return []any{o("type", "thread.started", "thread_id", session), o("type", "turn.started")}
}

func (e *codexEmitter) text(s string) any {
	return o("type", "item.completed", "item", o("id", e.nextID(), "type", "agent_message", "text", s))
}

// toolCall prints the item.started of a shell command; codex has no tool
// names, every command is a command_execution item.
func (e *codexEmitter) toolCall(id, _ string, input map[string]any) any {
	return o("type", "item.started", "item", o("id", id, "type", "command_execution",
		"command", command(input), "aggregated_output", "", "exit_code", nil, "status", "in_progress"))
}

func (e *codexEmitter) toolResult(id, _ string, input map[string]any, output string, isError bool) any {
	exit, status := 0, "completed"
	if isError {
		exit, status = 1, "failed"
	}
	return o("type", "item.completed", "item", o("id", id, "type", "command_execution",
		"command", command(input), "aggregated_output", output, "exit_code", exit, "status", status))
}

func (e *codexEmitter) result(isError bool, text string, u usage, _ int) []any {
	if isError {
		return []any{o("type", "error", "message", text), o("type", "turn.failed", "error", o("message", text))}
	}
	return []any{o("type", "turn.completed", "usage", o("input_tokens", u.in+u.cacheRead,
		"cached_input_tokens", u.cacheRead, "output_tokens", u.out))}
}

// command renders a tool input as the shell command codex would run.
func command(input map[string]any) string {
	if c, ok := input["command"].(string); ok {
		return "bash -lc '" + c + "'"
	}
	if p, ok := input["file_path"].(string); ok {
		return "bash -lc 'cat " + p + "'"
	}
	return "bash -lc true"
}
