package digest

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

func TestLine(t *testing.T) {
	code := int32(3)
	cost := 0.0123
	input, _ := structpb.NewStruct(map[string]any{"path": "main.go"})
	cases := []struct {
		rule string
		ev   *eventsv1.RunEvent
		want string
	}{
		{"a lifecycle line shows phase, status, exit code and reason",
			&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_Lifecycle{Lifecycle: &eventsv1.Lifecycle{Phase: "agent", Status: "failed", ExitCode: &code, Reason: "boom"}}},
			"agent/failed exit=3 — boom"},
		{"a tool call shows the tool and its input", &eventsv1.RunEvent{Payload: &eventsv1.RunEvent_ToolCall{ToolCall: &eventsv1.ToolCall{Name: "Read", Input: input}}}, `Read {"path":"main.go"}`},
		{"a result shows its cost", &eventsv1.RunEvent{Payload: &eventsv1.RunEvent_Result{Result: &eventsv1.Result{NumTurns: 2, CostUsd: &cost}}}, "done turns=2 cost=$0.0123"},
		{"long text is cut to one short line", &eventsv1.RunEvent{Payload: &eventsv1.RunEvent_Message{Message: &eventsv1.Message{Role: "assistant", Text: strings.Repeat("word\n", 100)}}}, "…"},
		{"an unparsed line shows its raw text", &eventsv1.RunEvent{Raw: []byte("plain text")}, "raw         plain text"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			got := Line(c.ev)
			if !strings.Contains(got, c.want) || strings.Contains(got, "\n") || len([]rune(got)) > MaxText+40 {
				t.Errorf("Line = %q, want it to contain %q on one short line", got, c.want)
			}
		})
	}
}

func TestInterestingAndFinal(t *testing.T) {
	lc := func(phase, status string) *eventsv1.RunEvent {
		return &eventsv1.RunEvent{Payload: &eventsv1.RunEvent_Lifecycle{Lifecycle: &eventsv1.Lifecycle{Phase: phase, Status: status}}}
	}
	cases := []struct {
		rule              string
		ev                *eventsv1.RunEvent
		interesting, last bool
	}{
		{"init progress ticks are hidden", lc("init", "running"), false, false},
		{"init's end is shown but is not the run's end", lc("init", "succeeded"), true, false},
		{"agent/succeeded ends the run", lc("agent", "succeeded"), true, true},
		{"agent/failed ends the run", lc("agent", "failed"), true, true},
		{"unclassified lines are hidden", &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_RAW}, false, false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if Interesting(c.ev) != c.interesting || Final(c.ev) != c.last {
				t.Errorf("Interesting %v Final %v", Interesting(c.ev), Final(c.ev))
			}
		})
	}
}
