package vendors

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// describe renders an event as one stable line for golden files.
func describe(e Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s vendor=%s session=%s", e.Kind, e.Vendor, e.SessionID)
	if e.Role != "" {
		fmt.Fprintf(&b, " role=%s", e.Role)
	}
	if e.ToolName != "" || e.ToolID != "" {
		fmt.Fprintf(&b, " tool=%s id=%s", e.ToolName, e.ToolID)
	}
	if len(e.ToolInput) > 0 {
		fmt.Fprintf(&b, " input=%s", e.ToolInput)
	}
	if e.IsError {
		b.WriteString(" error")
	}
	if e.Kind == KindUsage || e.Kind == KindResult {
		u := e.Usage
		fmt.Fprintf(&b, " in=%d out=%d cache_read=%d cache_write=%d", u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheCreationTokens)
		if u.HasCost {
			fmt.Fprintf(&b, " cost=%g", u.CostUSD)
		}
	}
	if e.NumTurns != 0 || e.DurationMS != 0 {
		fmt.Fprintf(&b, " turns=%d ms=%d", e.NumTurns, e.DurationMS)
	}
	if e.Text != "" {
		fmt.Fprintf(&b, " text=%q", e.Text)
	}
	return b.String()
}

// parseFile parses every line of a transcript and returns the events as
// golden lines, and the errors.
func parseFile(t *testing.T, p Parser, path string) ([]string, []error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []string
	var errs []error
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		evs, err := p.Parse(sc.Bytes())
		if err != nil {
			errs = append(errs, err)
		}
		for _, e := range evs {
			out = append(out, describe(e))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out, errs
}

// TestTranscripts parses each real-format transcript and compares the
// events with testdata/transcripts/<name>.events.golden.
func TestTranscripts(t *testing.T) {
	paths, err := filepath.Glob("testdata/transcripts/*.jsonl")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		vendor, _, _ := strings.Cut(name, "_")
		t.Run(name, func(t *testing.T) {
			v, ok := ByName(vendor)
			if !ok {
				t.Fatalf("transcript %s names no vendor", name)
			}
			lines, errs := parseFile(t, v.NewParser(), path)
			if len(errs) > 0 {
				t.Errorf("well-formed transcript gave errors: %v", errs)
			}
			checkGolden(t, filepath.Join("transcripts", name+".events.golden"), []byte(strings.Join(lines, "\n")+"\n"))
		})
	}
}

// lastOf returns the last event of kind k, or a zero event.
func lastOf(t *testing.T, vendor, transcript string, k Kind) (Event, Parser) {
	t.Helper()
	v, _ := ByName(vendor)
	p := v.NewParser()
	data, err := os.ReadFile(filepath.Join("testdata/transcripts", transcript))
	if err != nil {
		t.Fatal(err)
	}
	var last Event
	for _, line := range bytes.Split(data, []byte("\n")) {
		evs, _ := p.Parse(line)
		for _, e := range evs {
			if e.Kind == k {
				last = e
			}
		}
	}
	return last, p
}

// TestResultFacts pins the facts the supervisor and controller rely on:
// the terminal result, its error flag and text, cost and the session id.
func TestResultFacts(t *testing.T) {
	tests := []struct {
		name, vendor, transcript string
		wantError                bool
		wantText                 string
		wantCost                 float64
		wantHasCost              bool
		wantSession              string
	}{
		{"claude result carries cost and session id", "claude", "claude_tools.jsonl", false,
			"Count drops one character. Fixed: it now returns len(s).", 0.1412, true, "4f1c2a9e-8b7d-4e21-9f3a-1c2d3e4f5a6b"},
		{"claude is_error true fails even with subtype success", "claude", "claude_error.jsonl", true,
			`API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 0, true, "9b8c7d6e-0000-4a1b-8c2d-3e4f5a6b7c8d"},
		{"claude error result without text says its subtype", "claude", "claude_max_turns.jsonl", true,
			"error_max_turns", 0.0311, true, "aa11bb22-cc33-4d44-8e55-ff6677889900"},
		{"codex result text is the last agent message; thread id is the session", "codex", "codex_tools.jsonl", false,
			"Fixed Count: it returned len(s)-1.", 0, false, "0199a213-81c0-7800-8aa1-bbab2a035a53"},
		{"codex turn.failed is an error result", "codex", "codex_failed.jsonl", true,
			"stream disconnected before completion: Rate limit reached for gpt-5-codex", 0, false, "0199a214-0000-7000-8000-000000000001"},
		{"gemini result text joins assistant deltas; init session id carried on", "gemini", "gemini_tools.jsonl", false,
			"I'll run the tests first. Fixed Count.", 0, false, "c0ffee00-1234-4abc-9def-0123456789ab"},
		{"gemini status error is an error result with the error message", "gemini", "gemini_error.jsonl", true,
			"Reached max session turns for this session.", 0, false, "deadbeef-0000-4000-8000-000000000002"},
		{"opencode stop step is the result with the summed cost", "opencode", "opencode_tools.jsonl", false,
			"Fixed Count.", 0.02, true, "ses_494719016ffe85dkDMj0FPRbHK"},
		{"opencode error event is an error result", "opencode", "opencode_error.jsonl", true,
			"Incorrect API key provided", 0, false, "ses_49471aaaaaaaaaaaaaaaaaaaaa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, p := lastOf(t, tt.vendor, tt.transcript, KindResult)
			if r.Kind != KindResult {
				t.Fatal("no result event")
			}
			if r.IsError != tt.wantError || r.Text != tt.wantText {
				t.Errorf("result = error %v text %q, want error %v text %q", r.IsError, r.Text, tt.wantError, tt.wantText)
			}
			if r.Usage.HasCost != tt.wantHasCost || (tt.wantHasCost && fmt.Sprintf("%.6f", r.Usage.CostUSD) != fmt.Sprintf("%.6f", tt.wantCost)) {
				t.Errorf("cost = %v (%v), want %v (%v)", r.Usage.CostUSD, r.Usage.HasCost, tt.wantCost, tt.wantHasCost)
			}
			if r.SessionID != tt.wantSession || p.SessionID() != tt.wantSession {
				t.Errorf("session = %q / parser %q, want %q", r.SessionID, p.SessionID(), tt.wantSession)
			}
		})
	}
}

// TestMalformedLines checks that bad input yields a raw event and a counted
// error, never a panic or a lost line.
func TestMalformedLines(t *testing.T) {
	tests := []struct {
		name      string
		line      string
		wantKinds []Kind
		wantErr   bool
	}{
		{"blank line gives nothing", "   ", nil, false},
		{"plain text is raw with an error", "Loading configuration...", []Kind{KindRaw}, true},
		{"truncated JSON is raw with an error", `{"type":"result","is_err`, []Kind{KindRaw}, true},
		{"JSON array is raw with an error", `[1,2,3]`, []Kind{KindRaw}, true},
		{"JSON string is raw with an error", `"hello"`, []Kind{KindRaw}, true},
		{"unknown type is raw without error", `{"type":"something_new","x":1}`, []Kind{KindRaw}, false},
		{"object without type is raw without error", `{}`, []Kind{KindRaw}, false},
	}
	for _, v := range All() {
		for _, tt := range tests {
			t.Run(v.Name()+"/"+tt.name, func(t *testing.T) {
				evs, err := v.NewParser().Parse([]byte(tt.line))
				if (err != nil) != tt.wantErr {
					t.Fatalf("err = %v, want error %v", err, tt.wantErr)
				}
				if err != nil && !errors.Is(err, ErrMalformedLine) {
					t.Errorf("err = %v, want it to wrap ErrMalformedLine", err)
				}
				if len(evs) != len(tt.wantKinds) {
					t.Fatalf("got %d events, want %d", len(evs), len(tt.wantKinds))
				}
				for i, e := range evs {
					if e.Kind != tt.wantKinds[i] || e.Vendor != v.Name() {
						t.Errorf("event %d = %s/%s, want %s/%s", i, e.Kind, e.Vendor, tt.wantKinds[i], v.Name())
					}
				}
			})
		}
	}
}

// TestWrongFieldTypeKeepsTheRest checks that a field of an unexpected type
// is reported but does not hide the rest of the line, so a terminal result
// is still seen.
func TestWrongFieldTypeKeepsTheRest(t *testing.T) {
	p := claudeVendor.NewParser()
	evs, err := p.Parse([]byte(`{"type":"result","subtype":"success","is_error":false,"num_turns":"three","result":"done","session_id":"s1"}`))
	if !errors.Is(err, ErrMalformedLine) {
		t.Errorf("err = %v, want ErrMalformedLine", err)
	}
	if len(evs) != 1 || evs[0].Kind != KindResult || evs[0].Text != "done" || evs[0].SessionID != "s1" {
		t.Errorf("events = %+v, want the result", evs)
	}
}

// TestOddContentKeepsTheLine checks that a content block of an unexpected
// shape does not hide the fields after it, such as the session id.
func TestOddContentKeepsTheLine(t *testing.T) {
	p := claudeVendor.NewParser()
	evs, _ := p.Parse([]byte(`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":5},{"type":"tool_use","id":"t","name":"Bash","input":{}}]},"session_id":"s9"}`))
	if p.SessionID() != "s9" || len(evs) != 1 || evs[0].Kind != KindToolCall {
		t.Errorf("session %q, events %+v", p.SessionID(), evs)
	}
}

// TestSessionIDFollowsNewestLine checks the rule "always take the id from
// the newest line": a resumed Claude session may mint a new id.
func TestSessionIDFollowsNewestLine(t *testing.T) {
	p := claudeVendor.NewParser()
	_, _ = p.Parse([]byte(`{"type":"system","subtype":"init","session_id":"old"}`))
	evs, _ := p.Parse([]byte(`{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"new"}`))
	if p.SessionID() != "new" || evs[0].SessionID != "new" {
		t.Errorf("session = %q / event %q, want new", p.SessionID(), evs[0].SessionID)
	}
}

// TestLastSessionID checks reading the session id back from a log tail,
// which may start mid-line and hold lines from other writers.
func TestLastSessionID(t *testing.T) {
	tests := []struct {
		name, vendor, log, want string
	}{
		{"claude takes the newest id", NameClaude,
			"ion_id\":\"cut\"}\n[agent] warning\n{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"a\"}\n{\"type\":\"result\",\"session_id\":\"b\",\"is_error\":false}", "b"},
		{"codex takes the thread id", NameCodex, "{\"type\":\"thread.started\",\"thread_id\":\"t-1\"}\n{\"type\":\"turn.started\"}\n", "t-1"},
		{"gemini takes the init id", NameGemini, "{\"type\":\"init\",\"session_id\":\"g-1\"}\n{\"type\":\"result\",\"status\":\"success\"}\n", "g-1"},
		{"opencode takes sessionID", NameOpenCode, "{\"type\":\"text\",\"sessionID\":\"ses_1\",\"part\":{\"text\":\"x\"}}", "ses_1"},
		{"no id gives empty", NameGemini, "plain text\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, _ := ByName(tt.vendor)
			if got := LastSessionID(v, []byte(tt.log)); got != tt.want {
				t.Errorf("LastSessionID = %q, want %q", got, tt.want)
			}
		})
	}
}
