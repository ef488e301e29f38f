package sinks

import (
	"strconv"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

func msg(role, text string) *eventsv1.RunEvent {
	return &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_MESSAGE,
		Payload: &eventsv1.RunEvent_Message{Message: &eventsv1.Message{Role: role, Text: text}}}
}

func toolCall(id, name string, input map[string]any) *eventsv1.RunEvent {
	s, err := structpb.NewStruct(input)
	if err != nil {
		panic(err)
	}
	return &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_TOOL_CALL,
		Payload: &eventsv1.RunEvent_ToolCall{ToolCall: &eventsv1.ToolCall{Id: id, Name: name, Input: s}}}
}

func toolResult(callID, text string) *eventsv1.RunEvent {
	return &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_TOOL_RESULT,
		Payload: &eventsv1.RunEvent_ToolResult{ToolResult: &eventsv1.ToolResult{ToolCallId: callID, Text: text}}}
}

func result(text string) *eventsv1.RunEvent {
	return &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_RESULT,
		Payload: &eventsv1.RunEvent_Result{Result: &eventsv1.Result{Text: text}}}
}

func usage() *eventsv1.RunEvent {
	return &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_USAGE,
		Payload: &eventsv1.RunEvent_Usage{Usage: &eventsv1.Usage{InputTokens: 1}}, Raw: []byte(`{"type":"system","subtype":"token_count"}`)}
}

func lifecycle() *eventsv1.RunEvent {
	return &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_LIFECYCLE,
		Payload: &eventsv1.RunEvent_Lifecycle{Lifecycle: &eventsv1.Lifecycle{Phase: "agent", Status: "started"}}}
}

func fileEvent() *eventsv1.RunEvent {
	return &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_FILE,
		Payload: &eventsv1.RunEvent_File{File: &eventsv1.FileEvent{Event: "report", Path: "/workspace/r.md"}}}
}

func rawLine() *eventsv1.RunEvent {
	return &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_RAW, Raw: []byte(`not json`)}
}

func TestSelectMatrix(t *testing.T) {
	tests := []struct {
		name string
		sel  Select
		ev   *eventsv1.RunEvent
		want bool
	}{
		{"empty select passes every CLI event", nil, msg("assistant", "x"), true},
		{"empty select passes unclassified lines", nil, rawLine(), true},
		{"lifecycle events always pass", Select{{Event: "result"}}, lifecycle(), true},
		{"file events always pass", Select{{Event: "result"}}, fileEvent(), true},
		{"unclassified lines never pass a non-empty select", Select{{Event: "message"}}, rawLine(), false},
		{"event kind must be equal", Select{{Event: "result"}}, msg("assistant", "x"), false},
		{"event kind equal passes", Select{{Event: "result"}}, result("done"), true},
		{"usage is selectable", Select{{Event: "usage"}}, usage(), true},
		{"entries are ORed", Select{{Event: "result"}, {Event: "message"}}, msg("assistant", "x"), true},
		{"fields within an entry are ANDed", Select{{Event: "message", Contains: "ok", Role: "user"}}, msg("assistant", "ok"), false},
		{"tool matches the tool call name exactly", Select{{Event: "tool_call", Tool: "Bash"}}, toolCall("1", "Bash", nil), true},
		{"tool is not a substring match", Select{{Event: "tool_call", Tool: "Bas"}}, toolCall("1", "Bash", nil), false},
		{"tool is case sensitive", Select{{Event: "tool_call", Tool: "bash"}}, toolCall("1", "Bash", nil), false},
		{"tool on a message never matches", Select{{Event: "message", Tool: "Bash"}}, msg("assistant", "x"), false},
		{"role matches message speaker", Select{{Event: "message", Role: "assistant"}}, msg("assistant", "x"), true},
		{"role mismatch on message fails", Select{{Event: "message", Role: "user"}}, msg("assistant", "x"), false},
		{"role is ignored on non-message kinds", Select{{Event: "tool_call", Role: "user"}}, toolCall("1", "Bash", nil), true},
		{"contains is a substring of message text", Select{{Event: "message", Contains: "ell"}}, msg("assistant", "hello"), true},
		{"contains is case sensitive", Select{{Event: "message", Contains: "Hello"}}, msg("assistant", "hello"), false},
		{"contains searches tool result text", Select{{Event: "tool_result", Contains: "PASS"}}, toolResult("1", "tests PASS"), true},
		{"contains searches result text", Select{{Event: "result", Contains: "done"}}, result("all done"), true},
		{"contains searches tool call arguments", Select{{Event: "tool_call", Contains: "go test"}},
			toolCall("1", "Bash", map[string]any{"command": "go test ./...", "n": []any{"x"}}), true},
		{"contains searches the raw line", Select{{Event: "usage", Contains: "token_count"}}, usage(), true},
		{"contains absent fails", Select{{Event: "message", Contains: "zzz"}}, msg("assistant", "hello"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewMatcher(tt.sel).Match(tt.ev); got != tt.want {
				t.Fatalf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSelectToolResultMatchesByTheCallsToolName(t *testing.T) {
	m := NewMatcher(Select{{Event: "tool_result", Tool: "Bash"}})
	if m.Match(toolCall("c1", "Bash", nil)) {
		t.Fatal("a tool_call is not a tool_result")
	}
	m.Match(toolCall("c2", "Read", nil))
	if !m.Match(toolResult("c1", "out")) {
		t.Fatal("result of a Bash call must match tool Bash")
	}
	if m.Match(toolResult("c2", "out")) {
		t.Fatal("result of a Read call must not match tool Bash")
	}
	if m.Match(toolResult("unknown", "out")) {
		t.Fatal("result of an unseen call has no tool name")
	}
	for i := range rememberedCalls + 1 { // memory is bounded: the oldest call is forgotten
		m.Match(toolCall("x"+strconv.Itoa(i), "Other", nil))
	}
	if m.Match(toolResult("c1", "out")) {
		t.Fatal("memory of tool calls must be bounded")
	}
}

func TestParseSelect(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int
		wantErr bool
	}{
		{"empty input selects everything", "", 0, false},
		{"null selects everything", "null", 0, false},
		{"malformed JSON fails open", "[{", 0, true},
		{"unknown events are dropped not coerced", `[{"event":"tool_calls"},{"event":"message"}]`, 1, true},
		{"all unknown fails open", `[{"event":"bogus"}]`, 0, true},
		{"snake_case keys as the controller writes them", `[{"event":"tool_call","tool":"Bash","role":"assistant","contains":"x"}]`, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := ParseSelect([]byte(tt.in))
			if len(sel) != tt.want || (err != nil) != tt.wantErr {
				t.Fatalf("got %v, %v", sel, err)
			}
		})
	}
}

func FuzzParseSelect(f *testing.F) {
	for _, s := range []string{"", "null", "[]", `[{"event":"message","contains":"x"}]`, `[{"event":1}]`, `{"event":"message"}`, "[{"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sel, _ := ParseSelect(data)
		for _, s := range sel {
			if !selectEvents[s.Event] {
				t.Fatalf("unknown event %q kept", s.Event)
			}
		}
		// Whatever parsed must be usable on any event without panicking.
		m := NewMatcher(sel)
		for _, ev := range []*eventsv1.RunEvent{msg("assistant", string(data)), toolResult("1", ""), rawLine(), {}} {
			m.Match(ev)
		}
	})
}

func BenchmarkSelect(b *testing.B) {
	m := NewMatcher(Select{{Event: "tool_call", Tool: "Bash"}, {Event: "message", Role: "assistant", Contains: "needle"}, {Event: "result"}})
	evs := []*eventsv1.RunEvent{
		msg("assistant", "a fairly ordinary line of model output without the word we look for"),
		toolCall("1", "Bash", map[string]any{"command": "ls"}),
		toolResult("1", "file.go"),
		result("done"),
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		m.Match(evs[i%len(evs)])
	}
}
