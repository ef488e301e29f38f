package sinks

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/libs/sinks/sinkstest"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// identity is a run with every source field set.
func identity() *eventsv1.RunIdentity {
	return &eventsv1.RunIdentity{Namespace: "team", Agent: "fixer", Uid: "u1", Station: "st", TaskId: "T-1", Pod: "agent-job-fixer-x"}
}

func withRun(ev *eventsv1.RunEvent, r *eventsv1.RunIdentity) *eventsv1.RunEvent {
	ev.Run, ev.Sequence, ev.Id = r, 7, "u1-7"
	ev.Time = timestamppb.New(time.Date(2026, 12, 1, 10, 0, 0, 5, time.UTC))
	return ev
}

func TestPayloadFollowsTheDocumentedEnvelope(t *testing.T) {
	const tail = `,"id":"u1-7","sequence":7,"time":"2026-12-01T10:00:00.000000005Z"}`
	const src = `{"source":{"agent":"fixer","station":"st","task":"T-1","pod":"agent-job-fixer-x","namespace":"team","uid":"u1"},"event":`
	cliLine := func(line string) *eventsv1.RunEvent {
		ev := msg("assistant", "x")
		ev.Raw = []byte(line)
		return ev
	}
	tests := []struct {
		name string
		ev   *eventsv1.RunEvent
		run  *eventsv1.RunIdentity
		want string
	}{
		{"a CLI line that is JSON is the event, as the CLI printed it",
			cliLine(`{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}`), identity(),
			src + `{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}` + tail},
		{"a CLI line that is not JSON is the event as a JSON string",
			&eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_RAW, Raw: []byte("plain \"text\"\tline")}, identity(),
			src + `"plain \"text\"\tline"` + tail},
		{"empty source ids are left out",
			lifecycle(), &eventsv1.RunIdentity{Namespace: "team", Agent: "fixer"},
			`{"source":{"agent":"fixer","namespace":"team"},"event":{"kind":"lifecycle","phase":"agent","status":"started"}` + tail},
		{"a lifecycle event is a lowercase object and keeps exitCode 0",
			&eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_LIFECYCLE, Payload: &eventsv1.RunEvent_Lifecycle{Lifecycle: &eventsv1.Lifecycle{
				Phase: "agent", Status: "succeeded", ExitCode: proto.Int32(0)}}}, identity(),
			src + `{"kind":"lifecycle","phase":"agent","status":"succeeded","exitCode":0}` + tail},
		{"a lifecycle event carries tool, reason and message when set",
			&eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_LIFECYCLE, Payload: &eventsv1.RunEvent_Lifecycle{Lifecycle: &eventsv1.Lifecycle{
				Phase: "init", Status: "skipped", Tool: "conversation", Reason: "status-503", Message: "store said 503"}}}, identity(),
			src + `{"kind":"lifecycle","phase":"init","status":"skipped","tool":"conversation","reason":"status-503","message":"store said 503"}` + tail},
		{"a file event carries content",
			&eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_FILE, Payload: &eventsv1.RunEvent_File{File: &eventsv1.FileEvent{
				Event: "report", Path: "/workspace/r.md", Content: "# done\n"}}}, identity(),
			src + `{"kind":"file","event":"report","path":"/workspace/r.md","content":"# done\n"}` + tail},
		{"a file event without content carries its reason instead",
			&eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_FILE, Payload: &eventsv1.RunEvent_File{File: &eventsv1.FileEvent{
				Event: "report", Path: "/workspace/r.md", Reason: "missing"}}}, identity(),
			src + `{"kind":"file","event":"report","path":"/workspace/r.md","reason":"missing"}` + tail},
		{"a batch event names provider, batch id and status",
			&eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_BATCH, Payload: &eventsv1.RunEvent_Batch{Batch: &eventsv1.BatchEvent{
				Provider: "anthropic", BatchId: "msgbatch_1", Status: "in_progress"}}}, identity(),
			src + `{"kind":"batch","provider":"anthropic","batchId":"msgbatch_1","status":"in_progress"}` + tail},
		{"a CLI event without its line is its typed payload",
			msg("assistant", "hello"), identity(),
			src + `{"kind":"message","role":"assistant","text":"hello"}` + tail},
		{"invalid UTF-8 becomes U+FFFD and control characters are escaped",
			&eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_RAW, Raw: []byte("a\xffb\x01")}, identity(),
			src + `"a\ufffdb\u0001"` + tail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Payload(withRun(tt.ev, tt.run))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("payload\n got %s\nwant %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Fatal("not JSON")
			}
			sinkstest.Check(t, got)
		})
	}
}

func TestAnEnvelopedLineIsNeverWrappedTwice(t *testing.T) {
	ev := withRun(msg("assistant", "x"), identity())
	ev.Raw = []byte(`{"source":{"agent":"other"},"event":{"type":"result"}}`)
	if _, err := Payload(ev); !errors.Is(err, ErrEnveloped) {
		t.Fatalf("err %v, want ErrEnveloped", err)
	}
	// Through a Set: the payload sink gets nothing, the event sink the event.
	gated, all := &payloads{}, &recorder{}
	set := NewSet([]Member{{Name: "gated", Payloads: gated}, {Name: "all", Sink: all}}, SetOptions{})
	if err := set.DeliverLine(ev.Raw, []*eventsv1.RunEvent{ev}); !errors.Is(err, ErrEnveloped) {
		t.Fatalf("DeliverLine: %v", err)
	}
	closeSet(t, set)
	if len(gated.got) != 0 || all.len() != 1 {
		t.Fatalf("payload sink got %d, event sink %d", len(gated.got), all.len())
	}
	// A line that only mentions the words is an ordinary line.
	ev.Raw = []byte(`{"type":"result","result":"the event source"}`)
	if _, err := Payload(ev); err != nil {
		t.Fatal(err)
	}
}

func TestALineReachesPayloadSinksOnceWhateverItsEventCount(t *testing.T) {
	// One assistant line that holds text and a tool call: two events.
	line := []byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"t"},{"type":"tool_use","id":"c1","name":"Bash","input":{}}]}}`)
	tests := []struct {
		name     string
		sel      Select
		payloads int
	}{
		{"no select passes the line once", nil, 1},
		{"a select matching the second event passes the line once", Select{{Event: "tool_call", Tool: "Bash"}}, 1},
		{"a select matching both events passes the line once", Select{{Event: "tool_call"}, {Event: "message"}}, 1},
		{"a select matching neither event holds the line back", Select{{Event: "result"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := withRun(msg("assistant", "t"), identity())
			text.Raw = line
			call := withRun(toolCall("c1", "Bash", map[string]any{}), identity())
			gated, all := &payloads{}, &recorder{}
			set := NewSet([]Member{{Name: "gated", Payloads: gated}, {Name: "all", Sink: all}}, SetOptions{Select: tt.sel})
			_ = set.DeliverLine(line, []*eventsv1.RunEvent{text, call})
			closeSet(t, set)
			if len(gated.got) != tt.payloads || all.len() != 2 {
				t.Fatalf("payload sink got %d (want %d), event sink %d (want 2)", len(gated.got), tt.payloads, all.len())
			}
			for _, p := range gated.got {
				var env struct{ Event json.RawMessage }
				if err := json.Unmarshal(p, &env); err != nil || string(env.Event) != string(line) {
					t.Fatalf("payload %s does not carry the line", p)
				}
			}
		})
	}
}

func TestDeliverAllGroupsALinesEvents(t *testing.T) {
	line := []byte(`{"type":"assistant"}`)
	first := withRun(msg("assistant", "a"), identity())
	first.Raw = line
	second := withRun(toolCall("c", "Bash", map[string]any{}), identity())
	gated := &payloads{}
	set := NewSet([]Member{{Name: "gated", Payloads: gated}}, SetOptions{})
	_ = set.DeliverAll([]*eventsv1.RunEvent{withRun(lifecycle(), identity()), first, second, withRun(lifecycle(), identity())})
	closeSet(t, set)
	if len(gated.got) != 3 {
		t.Fatalf("got %d payloads, want lifecycle, the line once, lifecycle", len(gated.got))
	}
}

func TestSinkWritesNeverSeeAPayloadTheSchemaRefuses(t *testing.T) {
	// The schema itself must refuse what receivers could not handle.
	for name, bad := range map[string]string{
		"no source":                         `{"event":{"type":"result"}}`,
		"no event":                          `{"source":{}}`,
		"a lifecycle without status":        `{"source":{},"event":{"kind":"lifecycle","phase":"agent"}}`,
		"an unknown lifecycle status":       `{"source":{},"event":{"kind":"lifecycle","phase":"agent","status":"EVENT_KIND_LIFECYCLE"}}`,
		"a file with content and reason":    `{"source":{},"event":{"kind":"file","event":"e","path":"/w/p","content":"x","reason":"missing"}}`,
		"an event that is itself a payload": `{"source":{},"event":{"source":{},"event":1}}`,
		"an empty source id":                `{"source":{"agent":""},"event":1}`,
	} {
		if sinkstest.Validate([]byte(bad)) == nil {
			t.Errorf("%s: the schema accepts %s", name, bad)
		}
	}
}

func FuzzPayload(f *testing.F) {
	for _, s := range []string{`{"type":"result"}`, `not json`, `{"source":1,"event":2}`, "\xff\x00", `[1,2]`, `"s"`, ``} {
		f.Add([]byte(s), "agent", uint64(1))
	}
	f.Fuzz(func(t *testing.T, line []byte, agent string, seq uint64) {
		ev := &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_RAW, Raw: line, Sequence: seq,
			Run: &eventsv1.RunIdentity{Agent: agent, Namespace: "ns"}}
		out, err := Payload(ev)
		if errors.Is(err, ErrEnveloped) {
			return
		}
		if err != nil {
			t.Fatalf("payload of %q: %v", line, err)
		}
		if !json.Valid(out) {
			t.Fatalf("payload of %q is not JSON: %s", line, out)
		}
		if err := sinkstest.Validate(out); err != nil {
			t.Fatalf("payload of %q fails the schema: %v", line, err)
		}
		if _, err := Line(ev); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkPayload is the per-line cost a payload sink adds to a run.
func BenchmarkPayload(b *testing.B) {
	ev := withRun(msg("assistant", "x"), identity())
	ev.Raw = []byte(`{"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"Looking at the failing test now."}]},"session_id":"s"}`)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = AppendPayload(buf[:0], ev, ev.GetRaw())
		if err != nil {
			b.Fatal(err)
		}
	}
}
