package main

import (
	"crypto/rand"
	"time"
)

// openCodeEmitter prints `opencode run --format json` lines. OpenCode prints
// a tool only once it finished, so toolCall prints nothing.
type openCodeEmitter struct {
	session, message string
	part             int
}

// newSession returns an id shaped like OpenCode's: "ses_" and 26 characters.
func (e *openCodeEmitter) newSession() string {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	var b [26]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "ses_" + string(b[:])
}

func ms() int64 { return time.Now().UnixMilli() }

func (e *openCodeEmitter) base(typ string, part obj) obj {
	e.part++
	head := o("id", "prt_mock"+itoa(e.part), "sessionID", e.session, "messageID", e.message)
	return o("type", typ, "timestamp", ms(), "sessionID", e.session, "part", append(head, part...))
}

func (e *openCodeEmitter) start(session, _, _ string) []any {
	e.session, e.message = session, "msg_mock1"
	return []any{e.base("step_start", o("type", "step-start"))}
}

func (e *openCodeEmitter) text(s string) any {
	t := ms()
	return e.base("text", o("type", "text", "text", s, "time", o("start", t, "end", t)))
}

func (e *openCodeEmitter) toolCall(string, string, map[string]any) any { return nil }

var openCodeTools = map[string]string{"Bash": "bash", "Read": "read"}

func (e *openCodeEmitter) toolResult(id, name string, input map[string]any, output string, isError bool) any {
	t := ms()
	state := o("status", "completed", "input", input, "output", output, "title", name,
		"metadata", map[string]any{}, "time", o("start", t, "end", t))
	if isError {
		state = o("status", "error", "input", input, "error", output, "time", o("start", t, "end", t))
	}
	return e.base("tool_use", o("type", "tool", "callID", id, "tool", openCodeTools[name], "state", state))
}

func (e *openCodeEmitter) result(isError bool, text string, u usage, _ int) []any {
	if isError {
		return []any{o("type", "error", "timestamp", ms(), "sessionID", e.session,
			"error", o("name", "UnknownError", "data", o("message", text)))}
	}
	return []any{e.base("step_finish", o("type", "step-finish", "reason", "stop", "cost", u.cost,
		"tokens", o("input", u.in, "output", u.out, "reasoning", 0, "cache", o("read", u.cacheRead, "write", u.cacheWrite))))}
}
