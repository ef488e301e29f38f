package main

import "time"

// geminiEmitter prints Gemini CLI `--output-format stream-json` lines.
type geminiEmitter struct {
	model string
	calls int
}

func (e *geminiEmitter) newSession() string { return newUUID() }

func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }

func (e *geminiEmitter) start(session, model, prompt string) []any {
	if model == "" {
		model = "gemini-3-pro"
	}
	e.model = model
	lines := []any{o("type", "init", "timestamp", now(), "session_id", session, "model", model)}
	if prompt != "" {
		lines = append(lines, o("type", "message", "timestamp", now(), "role", "user", "content", prompt))
	}
	return lines
}

func (e *geminiEmitter) text(s string) any {
	return o("type", "message", "timestamp", now(), "role", "assistant", "content", s, "delta", true)
}

// Gemini names its tools differently from Claude.
var geminiTools = map[string]string{"Bash": "run_shell_command", "Read": "read_file"}

func (e *geminiEmitter) toolID(id, name string) string {
	return geminiTools[name] + "-" + id
}

func (e *geminiEmitter) toolCall(id, name string, input map[string]any) any {
	e.calls++
	return o("type", "tool_use", "timestamp", now(), "tool_name", geminiTools[name], "tool_id", e.toolID(id, name), "parameters", input)
}

func (e *geminiEmitter) toolResult(id, name string, _ map[string]any, output string, isError bool) any {
	if isError {
		return o("type", "tool_result", "timestamp", now(), "tool_id", e.toolID(id, name), "status", "error",
			"error", o("type", "file_not_found", "message", output))
	}
	return o("type", "tool_result", "timestamp", now(), "tool_id", e.toolID(id, name), "status", "success", "output", output)
}

func (e *geminiEmitter) result(isError bool, text string, u usage, _ int) []any {
	stats := o("total_tokens", u.in+u.cacheRead+u.out, "input_tokens", u.in+u.cacheRead, "output_tokens", u.out,
		"cached", u.cacheRead, "input", u.in, "duration_ms", 1234, "tool_calls", e.calls,
		"models", map[string]any{e.model: o("total_tokens", u.in+u.cacheRead+u.out, "input_tokens", u.in+u.cacheRead,
			"output_tokens", u.out, "cached", u.cacheRead, "input", u.in)})
	if isError {
		return []any{o("type", "result", "timestamp", now(), "status", "error",
			"error", o("type", "FatalError", "message", text), "stats", stats)}
	}
	return []any{o("type", "result", "timestamp", now(), "status", "success", "stats", stats)}
}
