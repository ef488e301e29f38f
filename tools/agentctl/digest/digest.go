// Package digest renders run events as short, readable lines for people
// following a run in a terminal (agentctl and the demo).
package digest

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// MaxText bounds the text shown for one event; the full event stays in
// NATS and the sinks.
const MaxText = 100

// Line renders ev as "KIND  detail". It never fails: an event it does not
// know is shown by kind.
func Line(ev *eventsv1.RunEvent) string {
	switch p := ev.GetPayload().(type) {
	case *eventsv1.RunEvent_Lifecycle:
		lc := p.Lifecycle
		s := fmt.Sprintf("%-11s %s", "lifecycle", lc.GetPhase())
		if lc.GetStatus() != "" {
			s += "/" + lc.GetStatus()
		}
		if lc.ExitCode != nil {
			s += fmt.Sprintf(" exit=%d", lc.GetExitCode())
		}
		if lc.GetReason() != "" {
			s += " — " + short(lc.GetReason())
		}
		return s
	case *eventsv1.RunEvent_Message:
		return fmt.Sprintf("%-11s %s: %s", "message", p.Message.GetRole(), short(p.Message.GetText()))
	case *eventsv1.RunEvent_ToolCall:
		in := ""
		if p.ToolCall.GetInput() != nil {
			if raw, err := protojson.Marshal(p.ToolCall.GetInput()); err == nil {
				in = " " + short(string(raw))
			}
		}
		return fmt.Sprintf("%-11s %s%s", "tool_call", p.ToolCall.GetName(), in)
	case *eventsv1.RunEvent_ToolResult:
		mark := "ok"
		if p.ToolResult.GetIsError() {
			mark = "error"
		}
		return fmt.Sprintf("%-11s %s %s", "tool_result", mark, short(p.ToolResult.GetText()))
	case *eventsv1.RunEvent_Usage:
		u := p.Usage
		s := fmt.Sprintf("%-11s in=%d out=%d", "usage", u.GetInputTokens(), u.GetOutputTokens())
		if u.CostUsd != nil {
			s += fmt.Sprintf(" cost=$%.4f", u.GetCostUsd())
		}
		return s
	case *eventsv1.RunEvent_Result:
		r := p.Result
		state := "done"
		if r.GetIsError() {
			state = "error"
		}
		s := fmt.Sprintf("%-11s %s turns=%d", "result", state, r.GetNumTurns())
		if r.CostUsd != nil {
			s += fmt.Sprintf(" cost=$%.4f", r.GetCostUsd())
		}
		if r.GetText() != "" {
			s += " — " + short(r.GetText())
		}
		return s
	case *eventsv1.RunEvent_File:
		return fmt.Sprintf("%-11s %s %s %s", "file", p.File.GetEvent(), p.File.GetPath(), p.File.GetReason())
	case *eventsv1.RunEvent_Batch:
		return fmt.Sprintf("%-11s %s %s %s", "batch", p.Batch.GetProvider(), p.Batch.GetBatchId(), p.Batch.GetStatus())
	}
	if len(ev.GetRaw()) > 0 {
		return fmt.Sprintf("%-11s %s", "raw", short(string(ev.GetRaw())))
	}
	return strings.ToLower(strings.TrimPrefix(ev.GetKind().String(), "EVENT_KIND_"))
}

// short flattens text to one line and cuts it at MaxText runes.
func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > MaxText {
		return string(r[:MaxText-1]) + "…"
	}
	return s
}

// Interesting keeps a terminal view readable: the init container's progress
// ticks and unclassified CLI lines stay in NATS and the sinks, off screen.
func Interesting(ev *eventsv1.RunEvent) bool {
	if lc := ev.GetLifecycle(); lc != nil {
		return lc.GetPhase() != "init" || lc.GetStatus() != "running"
	}
	return ev.GetKind() != eventsv1.EventKind_EVENT_KIND_RAW
}

// Final reports whether ev is the run's own terminal lifecycle event
// (agent/succeeded or agent/failed), after which a run emits nothing more.
func Final(ev *eventsv1.RunEvent) bool {
	lc := ev.GetLifecycle()
	return lc != nil && lc.GetPhase() == "agent" && (lc.GetStatus() == "succeeded" || lc.GetStatus() == "failed")
}
