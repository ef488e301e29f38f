package vendors

import (
	"fmt"
	"time"
)

// BatchResponse is one answer a vendor batch API returned for one request,
// in the terms every vendor shares. BatchLines writes it as the event lines
// the vendor's CLI would have printed, so a batch run's output reads like a
// pod run's.
type BatchResponse struct {
	// Model that answered (or was asked, when the request failed).
	Model string
	// MessageID is the vendor's id of the answer (msg_..., chatcmpl-...);
	// empty when the request failed.
	MessageID string
	// SessionID stands in for the CLI's session id: the batch id, or the
	// request's id within the batch.
	SessionID string
	// Text is the answer, or JSON text under structured output.
	Text string
	// StopReason is the vendor's word for why generation stopped.
	StopReason string
	// InputTokens and OutputTokens are the vendor's usage counters.
	InputTokens  int64
	OutputTokens int64
	// IsError marks a request that failed; ErrorMessage says why.
	IsError      bool
	ErrorMessage string
	// Time stamps the lines of CLIs that print one (Gemini); zero leaves
	// the timestamp out.
	Time time.Time
}

// BatchLines returns the JSON event lines (without newlines) that vendor's
// CLI ("claude", "codex" or "gemini") prints for a one-turn answer r. Each
// line is built with encoding/json, so any text in r stays data.
func BatchLines(vendor string, r BatchResponse) ([]string, error) {
	var objs []any
	switch vendor {
	case NameClaude:
		objs = claudeBatchLines(r)
	case NameCodex:
		objs = codexBatchLines(r)
	case NameGemini:
		objs = geminiBatchLines(r)
	default:
		return nil, fmt.Errorf("batch lines: vendor %q has no batch API", vendor)
	}
	lines := make([]string, 0, len(objs))
	for _, o := range objs {
		b, err := marshalJSON(o)
		if err != nil {
			return nil, fmt.Errorf("batch lines for %s: %w", vendor, err)
		}
		lines = append(lines, string(b))
	}
	return lines, nil
}

// jsonObj keeps the builders below short.
type jsonObj = map[string]any

// claudeBatchLines mirrors `claude --print --output-format stream-json`:
// system/init, one assistant message, result. A failed request still gets
// an assistant line carrying the error, as the CLI prints for API errors.
func claudeBatchLines(r BatchResponse) []any {
	usage := jsonObj{"input_tokens": r.InputTokens, "output_tokens": r.OutputTokens,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	text, subtype := r.Text, "success"
	if r.IsError {
		text, subtype = r.ErrorMessage, "error_during_execution"
	}
	msg := jsonObj{
		"id": r.MessageID, "type": "message", "role": "assistant", "model": r.Model,
		"content":     []any{jsonObj{"type": "text", "text": text}},
		"stop_reason": nilIfEmpty(r.StopReason), "stop_sequence": nil, "usage": usage,
	}
	assistant := jsonObj{"type": "assistant", "message": msg, "parent_tool_use_id": nil, "session_id": r.SessionID}
	if r.IsError {
		assistant["error"] = "batch_request_error"
	}
	return []any{
		jsonObj{"type": "system", "subtype": "init", "session_id": r.SessionID, "model": r.Model,
			"tools": []any{}, "mcp_servers": []any{}, "apiKeySource": "none"},
		assistant,
		jsonObj{"type": "result", "subtype": subtype, "is_error": r.IsError, "duration_ms": 0,
			"duration_api_ms": 0, "num_turns": 1, "result": text, "session_id": r.SessionID,
			"usage": usage, "stop_reason": nilIfEmpty(r.StopReason)},
	}
}

// codexBatchLines mirrors `codex exec --json`: thread.started, turn.started,
// then the answer and turn.completed, or error and turn.failed.
func codexBatchLines(r BatchResponse) []any {
	out := []any{jsonObj{"type": "thread.started", "thread_id": r.SessionID}, jsonObj{"type": "turn.started"}}
	if r.IsError {
		return append(out,
			jsonObj{"type": "error", "message": r.ErrorMessage},
			jsonObj{"type": "turn.failed", "error": jsonObj{"message": r.ErrorMessage}})
	}
	return append(out,
		jsonObj{"type": "item.completed", "item": jsonObj{"id": "item_0", "type": "agent_message", "text": r.Text}},
		jsonObj{"type": "turn.completed", "usage": jsonObj{"input_tokens": r.InputTokens, "cached_input_tokens": 0,
			"output_tokens": r.OutputTokens}})
}

// geminiBatchLines mirrors `gemini --output-format stream-json`: init, the
// assistant message (absent when the request failed), result with stats.
func geminiBatchLines(r BatchResponse) []any {
	stamp := func(o jsonObj) jsonObj {
		if !r.Time.IsZero() {
			o["timestamp"] = r.Time.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		return o
	}
	out := []any{stamp(jsonObj{"type": "init", "session_id": r.SessionID, "model": r.Model})}
	if !r.IsError {
		out = append(out, stamp(jsonObj{"type": "message", "role": "assistant", "content": r.Text, "delta": true}))
	}
	stats := jsonObj{"total_tokens": r.InputTokens + r.OutputTokens, "input_tokens": r.InputTokens,
		"output_tokens": r.OutputTokens, "cached": 0, "input": r.InputTokens, "duration_ms": 0, "tool_calls": 0}
	result := jsonObj{"type": "result", "status": "success", "stats": stats}
	if r.IsError {
		result["status"] = "error"
		result["error"] = jsonObj{"type": "BatchRequestError", "message": r.ErrorMessage}
	}
	return append(out, stamp(result))
}

// nilIfEmpty writes an unknown word as JSON null, as the vendors do.
func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
