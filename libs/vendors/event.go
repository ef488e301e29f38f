package vendors

import (
	"encoding/json"
	"errors"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// Kind is what an Event says happened. The values mirror eventsv1.EventKind
// for the kinds a CLI line can produce.
type Kind uint8

const (
	// KindRaw is a line that is kept but not classified: a vendor's init or
	// progress line, an unknown type, or a line that is not JSON.
	KindRaw Kind = iota
	// KindMessage is text from the model, the user or the CLI itself.
	KindMessage
	// KindToolCall is the model asking for a tool.
	KindToolCall
	// KindToolResult is a tool's answer.
	KindToolResult
	// KindUsage is token counters and cost.
	KindUsage
	// KindResult is the CLI's final outcome; seeing it means the run is done.
	KindResult
)

var kindNames = [...]string{"raw", "message", "tool_call", "tool_result", "usage", "result"}

// String returns the kind as output.select names it ("tool_call", ...).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Event is one thing a CLI line reported, in the model every vendor shares.
// Fields that do not apply to the kind are zero.
type Event struct {
	// Kind says which of the fields below are meaningful.
	Kind Kind
	// Vendor that printed the line.
	Vendor string
	// SessionID is the vendor's session id, carried on every event once the
	// stream revealed it (Gemini and Codex print it only at the start).
	SessionID string
	// Role of a message: "assistant", "user" or "system".
	Role string
	// Text of a message, a tool result or the result.
	Text string
	// ToolID is the vendor's id of a tool call; a tool result carries the
	// ToolID of the call it answers.
	ToolID string
	// ToolName is the tool a call asks for, as the vendor names it.
	ToolName string
	// ToolInput is the call's arguments as a JSON object.
	ToolInput json.RawMessage
	// IsError is set on a failed tool result or result, and on a message
	// that reports an error.
	IsError bool
	// Usage is set on usage events, and on results that report totals.
	Usage Usage
	// NumTurns is the vendor's count of model turns, on a result.
	NumTurns int32
	// DurationMS is the run's wall time as the vendor measured it, on a result.
	DurationMS int64
}

// Usage is token counters and cost as the vendor reported them.
type Usage struct {
	// InputTokens were billed at the normal input rate (cache reads excluded).
	InputTokens int64
	// OutputTokens were generated, reasoning included.
	OutputTokens int64
	// CacheReadTokens were served from the vendor's prompt cache.
	CacheReadTokens int64
	// CacheCreationTokens were written to the vendor's prompt cache.
	CacheCreationTokens int64
	// CostUSD is the cost in US dollars; meaningful only when HasCost is set.
	CostUSD float64
	// HasCost tells a reported cost of 0 from no cost reported (Codex and
	// Gemini report none).
	HasCost bool
}

// ErrMalformedLine is wrapped by the error Parse returns for a line that is
// not a JSON object or does not have its vendor's shape.
var ErrMalformedLine = errors.New("malformed event line")

// Proto returns the event as a RunEvent with kind, vendor, session id and
// payload set. Run identity, sequence, time, id and raw are the
// publisher's to fill.
func (e *Event) Proto() *eventsv1.RunEvent {
	re := &eventsv1.RunEvent{Vendor: e.Vendor, SessionId: e.SessionID}
	switch e.Kind {
	case KindMessage:
		re.Kind = eventsv1.EventKind_EVENT_KIND_MESSAGE
		re.Payload = &eventsv1.RunEvent_Message{Message: &eventsv1.Message{Role: e.Role, Text: e.Text}}
	case KindToolCall:
		re.Kind = eventsv1.EventKind_EVENT_KIND_TOOL_CALL
		re.Payload = &eventsv1.RunEvent_ToolCall{ToolCall: &eventsv1.ToolCall{
			Id: e.ToolID, Name: e.ToolName, Input: toolInputStruct(e.ToolInput)}}
	case KindToolResult:
		re.Kind = eventsv1.EventKind_EVENT_KIND_TOOL_RESULT
		re.Payload = &eventsv1.RunEvent_ToolResult{ToolResult: &eventsv1.ToolResult{
			ToolCallId: e.ToolID, IsError: e.IsError, Text: e.Text}}
	case KindUsage:
		re.Kind = eventsv1.EventKind_EVENT_KIND_USAGE
		u := &eventsv1.Usage{
			InputTokens: e.Usage.InputTokens, OutputTokens: e.Usage.OutputTokens,
			CacheReadTokens: e.Usage.CacheReadTokens, CacheCreationTokens: e.Usage.CacheCreationTokens,
		}
		if e.Usage.HasCost {
			u.CostUsd = &e.Usage.CostUSD
		}
		re.Payload = &eventsv1.RunEvent_Usage{Usage: u}
	case KindResult:
		re.Kind = eventsv1.EventKind_EVENT_KIND_RESULT
		r := &eventsv1.Result{IsError: e.IsError, Text: e.Text, NumTurns: e.NumTurns, DurationMs: e.DurationMS}
		if e.Usage.HasCost {
			r.CostUsd = &e.Usage.CostUSD
		}
		re.Payload = &eventsv1.RunEvent_Result{Result: r}
	default:
		re.Kind = eventsv1.EventKind_EVENT_KIND_RAW
	}
	return re
}

// toolInputStruct turns the call's arguments into a Struct. Arguments that
// are not a JSON object are wrapped as {"input": ...} so nothing is lost.
func toolInputStruct(raw json.RawMessage) *structpb.Struct {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := unmarshal(raw, &v); err != nil || v == nil {
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		obj = map[string]any{"input": v}
	}
	s, err := structpb.NewStruct(obj)
	if err != nil {
		return nil
	}
	return s
}
