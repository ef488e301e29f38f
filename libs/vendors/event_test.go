package vendors

import (
	"testing"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// TestProto checks the mapping of each kind onto the RunEvent payloads.
func TestProto(t *testing.T) {
	cost := Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheCreationTokens: 4, CostUSD: 0.5, HasCost: true}
	tests := []struct {
		name  string
		event Event
		check func(t *testing.T, re *eventsv1.RunEvent)
	}{
		{"raw has no payload", Event{Kind: KindRaw, Vendor: "claude", SessionID: "s"}, func(t *testing.T, re *eventsv1.RunEvent) {
			if re.GetKind() != eventsv1.EventKind_EVENT_KIND_RAW || re.GetPayload() != nil || re.GetVendor() != "claude" || re.GetSessionId() != "s" {
				t.Errorf("got %v", re)
			}
		}},
		{"message carries role and text", Event{Kind: KindMessage, Role: "assistant", Text: "hi"}, func(t *testing.T, re *eventsv1.RunEvent) {
			if m := re.GetMessage(); m.GetRole() != "assistant" || m.GetText() != "hi" {
				t.Errorf("got %v", re)
			}
		}},
		{"tool call input object becomes a Struct", Event{Kind: KindToolCall, ToolID: "t1", ToolName: "Bash", ToolInput: []byte(`{"command":"ls","n":2}`)},
			func(t *testing.T, re *eventsv1.RunEvent) {
				c := re.GetToolCall()
				if c.GetId() != "t1" || c.GetName() != "Bash" || c.GetInput().GetFields()["command"].GetStringValue() != "ls" ||
					c.GetInput().GetFields()["n"].GetNumberValue() != 2 {
					t.Errorf("got %v", re)
				}
			}},
		{"tool call input that is not an object is wrapped as input", Event{Kind: KindToolCall, ToolInput: []byte(`"ls -la"`)},
			func(t *testing.T, re *eventsv1.RunEvent) {
				if re.GetToolCall().GetInput().GetFields()["input"].GetStringValue() != "ls -la" {
					t.Errorf("got %v", re)
				}
			}},
		{"tool call with invalid input keeps the call without input", Event{Kind: KindToolCall, ToolName: "x", ToolInput: []byte(`{bad`)},
			func(t *testing.T, re *eventsv1.RunEvent) {
				if re.GetToolCall().GetName() != "x" || re.GetToolCall().GetInput() != nil {
					t.Errorf("got %v", re)
				}
			}},
		{"tool result carries its call id and error flag", Event{Kind: KindToolResult, ToolID: "t1", Text: "out", IsError: true},
			func(t *testing.T, re *eventsv1.RunEvent) {
				r := re.GetToolResult()
				if r.GetToolCallId() != "t1" || !r.GetIsError() || r.GetText() != "out" {
					t.Errorf("got %v", re)
				}
			}},
		{"usage sets cost only when reported", Event{Kind: KindUsage, Usage: Usage{InputTokens: 5}},
			func(t *testing.T, re *eventsv1.RunEvent) {
				if u := re.GetUsage(); u.GetInputTokens() != 5 || u.CostUsd != nil {
					t.Errorf("got %v", re)
				}
			}},
		{"usage with cost carries every counter", Event{Kind: KindUsage, Usage: cost},
			func(t *testing.T, re *eventsv1.RunEvent) {
				u := re.GetUsage()
				if u.GetInputTokens() != 1 || u.GetOutputTokens() != 2 || u.GetCacheReadTokens() != 3 ||
					u.GetCacheCreationTokens() != 4 || u.GetCostUsd() != 0.5 {
					t.Errorf("got %v", re)
				}
			}},
		{"result carries outcome, turns, duration and cost", Event{Kind: KindResult, IsError: true, Text: "bad", NumTurns: 3, DurationMS: 9, Usage: cost},
			func(t *testing.T, re *eventsv1.RunEvent) {
				r := re.GetResult()
				if !r.GetIsError() || r.GetText() != "bad" || r.GetNumTurns() != 3 || r.GetDurationMs() != 9 || r.GetCostUsd() != 0.5 {
					t.Errorf("got %v", re)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			re := tt.event.Proto()
			if got := re.GetKind().SubjectToken(); got != tt.event.Kind.String() {
				t.Errorf("kind %s, want %s", got, tt.event.Kind)
			}
			tt.check(t, re)
		})
	}
}
