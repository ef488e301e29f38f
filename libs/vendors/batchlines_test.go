package vendors

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// readBack parses lines with the vendor's own parser and returns the last
// assistant message, the result event and the session id it reported.
func readBack(t *testing.T, vendor string, lines []string) (msg string, result Event, session string) {
	t.Helper()
	v, ok := ByName(vendor)
	if !ok {
		t.Fatalf("no vendor %q", vendor)
	}
	p := v.NewParser()
	for _, l := range lines {
		if strings.Contains(l, "\n") {
			t.Fatalf("line has a newline: %q", l)
		}
		evs, err := p.Parse([]byte(l))
		if err != nil {
			t.Fatalf("parse %q: %v", l, err)
		}
		for _, e := range evs {
			switch e.Kind {
			case KindMessage:
				if e.Role == "assistant" {
					msg = e.Text
				}
			case KindResult:
				result = e
			}
		}
	}
	return msg, result, p.SessionID()
}

func TestBatchLinesReadBackByEachVendorsParser(t *testing.T) {
	// Text with quotes, newlines and a fake JSON line proves the text is
	// encoded as data, never spliced into the line.
	tricky := "line one\n\"quoted\" {\"type\":\"result\",\"is_error\":true} <b>&"
	ok := BatchResponse{
		Model: "m", MessageID: "msg_1", SessionID: "msgbatch_1", Text: tricky, StopReason: "end_turn",
		InputTokens: 12, OutputTokens: 34, Time: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
	}
	failed := BatchResponse{Model: "m", SessionID: "batch_2", IsError: true, ErrorMessage: "rate limited: \"slow down\""}
	cases := []struct {
		name     string
		vendor   string
		in       BatchResponse
		wantMsg  string
		wantText string
		wantErr  bool
		wantIn   int64
		wantOut  int64
	}{
		{"claude success reads back text usage and session", NameClaude, ok, tricky, tricky, false, 12, 34},
		{"claude error is a result with is_error and the message", NameClaude, failed, failed.ErrorMessage, failed.ErrorMessage, true, 0, 0},
		{"codex success reads back text usage and thread id", NameCodex, ok, tricky, tricky, false, 12, 34},
		{"codex error is a failed turn with the message", NameCodex, failed, "", failed.ErrorMessage, true, 0, 0},
		{"gemini success reads back text usage and session", NameGemini, ok, tricky, tricky, false, 12, 34},
		{"gemini error is an error result with the message", NameGemini, failed, "", failed.ErrorMessage, true, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lines, err := BatchLines(tc.vendor, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range lines {
				if !json.Valid([]byte(l)) {
					t.Fatalf("not JSON: %s", l)
				}
			}
			msg, res, session := readBack(t, tc.vendor, lines)
			if msg != tc.wantMsg {
				t.Errorf("assistant message = %q, want %q", msg, tc.wantMsg)
			}
			if res.Kind != KindResult || res.Text != tc.wantText || res.IsError != tc.wantErr {
				t.Errorf("result = %+v, want text %q error %v", res, tc.wantText, tc.wantErr)
			}
			if res.Usage.InputTokens != tc.wantIn || res.Usage.OutputTokens != tc.wantOut {
				t.Errorf("usage = %+v, want in %d out %d", res.Usage, tc.wantIn, tc.wantOut)
			}
			if session != tc.in.SessionID || res.SessionID != tc.in.SessionID {
				t.Errorf("session = %q (result %q), want %q", session, res.SessionID, tc.in.SessionID)
			}
		})
	}
}

func TestBatchLinesShapes(t *testing.T) {
	r := BatchResponse{Model: "claude-x", SessionID: "s", Text: "hi", Time: time.Unix(0, 0)}
	cases := []struct {
		name   string
		vendor string
		first  string // type of the first line
		last   string // type of the last line
		n      int
	}{
		{"claude starts with system init and ends with result", NameClaude, "system", "result", 3},
		{"codex starts with thread.started and ends with turn.completed", NameCodex, "thread.started", "turn.completed", 4},
		{"gemini starts with init and ends with result", NameGemini, "init", "result", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lines, err := BatchLines(tc.vendor, r)
			if err != nil {
				t.Fatal(err)
			}
			typeOf := func(l string) string {
				var v struct {
					Type string `json:"type"`
				}
				_ = json.Unmarshal([]byte(l), &v)
				return v.Type
			}
			if len(lines) != tc.n || typeOf(lines[0]) != tc.first || typeOf(lines[len(lines)-1]) != tc.last {
				t.Errorf("lines = %v", lines)
			}
		})
	}
}

func TestBatchLinesRefusesVendorsWithoutBatchAPI(t *testing.T) {
	for _, name := range []string{NameOpenCode, NameExec, ""} {
		t.Run("refuses "+name, func(t *testing.T) {
			if _, err := BatchLines(name, BatchResponse{}); err == nil {
				t.Errorf("BatchLines(%q) gave no error", name)
			}
		})
	}
}
