package eventsv1_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

var eventTime = time.Date(2026, 11, 29, 18, 0, 0, 123000000, time.UTC)

// newEvent returns an event with every envelope field set and the given
// kind; the caller sets the payload.
func newEvent(kind eventsv1.EventKind, seq uint64) *eventsv1.RunEvent {
	return &eventsv1.RunEvent{
		Run: &eventsv1.RunIdentity{
			Namespace: "team-a",
			Agent:     "fix-bug",
			Uid:       "6f1c2b9e-0d2a-4c55-9d57-1a2b3c4d5e6f",
			Station:   "gpu",
			TaskId:    "task-42",
		},
		Kind:      kind,
		Sequence:  seq,
		Time:      timestamppb.New(eventTime),
		Id:        "6f1c2b9e-0d2a-4c55-9d57-1a2b3c4d5e6f-" + strconv.FormatUint(seq, 10),
		Vendor:    "claude",
		SessionId: "sess-1",
	}
}

func mustStruct(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatalf("building struct: %v", err)
	}
	return s
}

// samples returns one event per kind, each with its payload filled in.
func samples(t testing.TB) []struct {
	name string
	ev   *eventsv1.RunEvent
} {
	t.Helper()
	lifecycle := newEvent(eventsv1.EventKind_EVENT_KIND_LIFECYCLE, 1)
	lifecycle.Payload = &eventsv1.RunEvent_Lifecycle{Lifecycle: &eventsv1.Lifecycle{
		Phase: "agent", Status: "succeeded", ExitCode: proto.Int32(0),
	}}
	failed := newEvent(eventsv1.EventKind_EVENT_KIND_LIFECYCLE, 9)
	failed.Payload = &eventsv1.RunEvent_Lifecycle{Lifecycle: &eventsv1.Lifecycle{
		Phase: "agent", Status: "failed", Reason: "deadline", ExitCode: proto.Int32(124),
	}}
	message := newEvent(eventsv1.EventKind_EVENT_KIND_MESSAGE, 2)
	message.Payload = &eventsv1.RunEvent_Message{Message: &eventsv1.Message{
		Role: "assistant", Text: "Looking at the failing test ✓\n",
	}}
	message.Raw = []byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"Looking"}]}}`)
	toolCall := newEvent(eventsv1.EventKind_EVENT_KIND_TOOL_CALL, 3)
	toolCall.Payload = &eventsv1.RunEvent_ToolCall{ToolCall: &eventsv1.ToolCall{
		Id: "toolu_01", Name: "Bash",
		Input: mustStruct(t, map[string]any{
			"command": "go test ./...",
			"timeout": 120.0,
			"env":     map[string]any{"CGO_ENABLED": "0"},
			"args":    []any{"-count=1", true, nil},
		}),
	}}
	toolResult := newEvent(eventsv1.EventKind_EVENT_KIND_TOOL_RESULT, 4)
	toolResult.Payload = &eventsv1.RunEvent_ToolResult{ToolResult: &eventsv1.ToolResult{
		ToolCallId: "toolu_01", IsError: true, Text: "exit status 1",
	}}
	usage := newEvent(eventsv1.EventKind_EVENT_KIND_USAGE, 5)
	usage.Payload = &eventsv1.RunEvent_Usage{Usage: &eventsv1.Usage{
		InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 9000, CacheCreationTokens: 512,
		CostUsd: proto.Float64(0.0421),
	}}
	result := newEvent(eventsv1.EventKind_EVENT_KIND_RESULT, 6)
	result.Payload = &eventsv1.RunEvent_Result{Result: &eventsv1.Result{
		Text: "Fixed.", NumTurns: 7, DurationMs: 81234, CostUsd: proto.Float64(0.13),
	}}
	file := newEvent(eventsv1.EventKind_EVENT_KIND_FILE, 7)
	file.Payload = &eventsv1.RunEvent_File{File: &eventsv1.FileEvent{
		Event: "report", Path: "/workspace/out/report.md", Content: "# Report\n",
	}}
	missing := newEvent(eventsv1.EventKind_EVENT_KIND_FILE, 8)
	missing.Payload = &eventsv1.RunEvent_File{File: &eventsv1.FileEvent{
		Event: "report", Path: "/workspace/out/missing.md", Reason: "missing",
	}}
	batch := newEvent(eventsv1.EventKind_EVENT_KIND_BATCH, 2)
	batch.Vendor = ""
	batch.Payload = &eventsv1.RunEvent_Batch{Batch: &eventsv1.BatchEvent{
		Provider: "anthropic", BatchId: "msgbatch_01", Status: "in_progress",
	}}
	raw := newEvent(eventsv1.EventKind_EVENT_KIND_RAW, 3)
	raw.Raw = []byte("{\"type\":\"something_new\",\"x\":\x01}")

	return []struct {
		name string
		ev   *eventsv1.RunEvent
	}{
		{"lifecycle keeps an exit code of zero", lifecycle},
		{"lifecycle failure keeps reason and exit code", failed},
		{"message keeps role, text and raw line", message},
		{"tool call keeps a nested JSON input", toolCall},
		{"tool result keeps the error flag", toolResult},
		{"usage keeps every counter and the cost", usage},
		{"result keeps turns, duration and cost", result},
		{"file keeps its content", file},
		{"file without content keeps the reason", missing},
		{"batch keeps provider, id and status", batch},
		{"raw keeps arbitrary bytes without a payload", raw},
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for _, tc := range samples(t) {
		t.Run(tc.name, func(t *testing.T) {
			b, err := protojson.Marshal(tc.ev)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			var got eventsv1.RunEvent
			if err := protojson.Unmarshal(b, &got); err != nil {
				t.Fatalf("unmarshal %s: %v", b, err)
			}
			if !proto.Equal(tc.ev, &got) {
				t.Fatalf("round trip changed the event\nwant %v\n got %v\njson %s", tc.ev, &got, b)
			}
		})
	}
}

func TestBinaryRoundTrip(t *testing.T) {
	for _, tc := range samples(t) {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.ev)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			var got eventsv1.RunEvent
			if err := proto.Unmarshal(b, &got); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !proto.Equal(tc.ev, &got) {
				t.Fatalf("round trip changed the event\nwant %v\n got %v", tc.ev, &got)
			}
		})
	}
}

// TestJSONMapping pins the wire names consumers of the JSON form rely on.
func TestJSONMapping(t *testing.T) {
	ev := newEvent(eventsv1.EventKind_EVENT_KIND_TOOL_CALL, 7)
	ev.Raw = []byte(`{"a":1}`)
	ev.Payload = &eventsv1.RunEvent_ToolCall{ToolCall: &eventsv1.ToolCall{
		Id: "toolu_01", Name: "Read", Input: mustStruct(t, map[string]any{"file_path": "/x"}),
	}}
	b, err := protojson.Marshal(ev)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("protojson output is not JSON: %v\n%s", err, b)
	}

	lc := newEvent(eventsv1.EventKind_EVENT_KIND_LIFECYCLE, 1)
	lc.Payload = &eventsv1.RunEvent_Lifecycle{Lifecycle: &eventsv1.Lifecycle{Phase: "agent", Status: "succeeded", ExitCode: proto.Int32(0)}}
	lcb, err := protojson.Marshal(lc)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var lcDoc map[string]any
	if err := json.Unmarshal(lcb, &lcDoc); err != nil {
		t.Fatalf("protojson output is not JSON: %v\n%s", err, lcb)
	}

	res := newEvent(eventsv1.EventKind_EVENT_KIND_RESULT, 2)
	res.Payload = &eventsv1.RunEvent_Result{Result: &eventsv1.Result{Text: "done"}}
	resb, err := protojson.Marshal(res)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var resDoc map[string]any
	if err := json.Unmarshal(resb, &resDoc); err != nil {
		t.Fatalf("protojson output is not JSON: %v\n%s", err, resb)
	}

	tests := []struct {
		name string
		doc  map[string]any
		path string // dot-separated keys
		want any    // nil means the key must be absent
	}{
		{"run identity field names are lowerCamel", doc, "run.taskId", "task-42"},
		{"envelope field names are lowerCamel", doc, "sessionId", "sess-1"},
		{"kind is the enum value name", doc, "kind", "EVENT_KIND_TOOL_CALL"},
		{"uint64 sequence is a decimal string", doc, "sequence", "7"},
		{"time is RFC 3339 in UTC", doc, "time", "2026-11-29T18:00:00.123Z"},
		{"dedupe id is plain id", doc, "id", ev.GetId()},
		{"oneof case is named by its lowerCamel field", doc, "toolCall.name", "Read"},
		{"struct input stays a JSON object with its own keys", doc, "toolCall.input.file_path", "/x"},
		{"raw bytes are base64", doc, "raw", "eyJhIjoxfQ=="},
		{"unset payload cases are omitted", doc, "lifecycle", nil},
		{"explicit zero exit code is emitted", lcDoc, "lifecycle.exitCode", 0.0},
		{"unset optional cost is omitted", resDoc, "result.costUsd", nil},
		{"zero scalars are omitted", resDoc, "result.numTurns", nil},
		{"set scalars are present", resDoc, "result.text", "done"},
		{"empty strings are omitted", lcDoc, "lifecycle.reason", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := lookup(tc.doc, tc.path)
			if tc.want == nil {
				if ok {
					t.Fatalf("%s: want absent, got %#v", tc.path, got)
				}
				return
			}
			if !ok {
				t.Fatalf("%s: missing from the JSON document %v", tc.path, tc.doc)
			}
			if got != tc.want {
				t.Fatalf("%s = %#v, want %#v", tc.path, got, tc.want)
			}
		})
	}
}

func lookup(doc map[string]any, path string) (any, bool) {
	var cur any = doc
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func TestJSONUnmarshalRules(t *testing.T) {
	tests := []struct {
		name    string
		opts    protojson.UnmarshalOptions
		in      string
		wantErr bool
		want    *eventsv1.RunEvent
	}{
		{
			name: "lowerCamel names and enum names decode",
			in:   `{"run":{"taskId":"t"},"kind":"EVENT_KIND_USAGE","sequence":"3","usage":{"inputTokens":"5","costUsd":0.5}}`,
			want: &eventsv1.RunEvent{Run: &eventsv1.RunIdentity{TaskId: "t"}, Kind: eventsv1.EventKind_EVENT_KIND_USAGE, Sequence: 3,
				Payload: &eventsv1.RunEvent_Usage{Usage: &eventsv1.Usage{InputTokens: 5, CostUsd: proto.Float64(0.5)}}},
		},
		{
			name: "proto field names and numbers also decode",
			in:   `{"run":{"task_id":"t"},"kind":3,"sequence":3,"session_id":"s"}`,
			want: &eventsv1.RunEvent{Run: &eventsv1.RunIdentity{TaskId: "t"}, Kind: eventsv1.EventKind_EVENT_KIND_TOOL_CALL, Sequence: 3, SessionId: "s"},
		},
		{
			name:    "unknown top-level field is rejected by default",
			in:      `{"run":{"namespace":"a"},"bogus":1}`,
			wantErr: true,
		},
		{
			name:    "unknown nested field is rejected by default",
			in:      `{"message":{"role":"user","mood":"happy"}}`,
			wantErr: true,
		},
		{
			name:    "unknown enum name is rejected by default",
			in:      `{"kind":"EVENT_KIND_TELEPATHY"}`,
			wantErr: true,
		},
		{
			name: "unknown fields are dropped with DiscardUnknown",
			opts: protojson.UnmarshalOptions{DiscardUnknown: true},
			in:   `{"run":{"namespace":"a","node":"n"},"bogus":{"x":[1,2]},"message":{"role":"user","mood":"happy"}}`,
			want: &eventsv1.RunEvent{Run: &eventsv1.RunIdentity{Namespace: "a"},
				Payload: &eventsv1.RunEvent_Message{Message: &eventsv1.Message{Role: "user"}}},
		},
		{
			name: "unknown enum name becomes unspecified with DiscardUnknown",
			opts: protojson.UnmarshalOptions{DiscardUnknown: true},
			in:   `{"kind":"EVENT_KIND_TELEPATHY","id":"x"}`,
			want: &eventsv1.RunEvent{Id: "x"},
		},
		{
			name:    "two payload cases at once are rejected",
			in:      `{"message":{},"usage":{}}`,
			wantErr: true,
		},
		{
			name:    "a sequence that is not a uint64 is rejected",
			in:      `{"sequence":"-1"}`,
			wantErr: true,
		},
		{
			name:    "a time that is not RFC 3339 is rejected",
			in:      `{"time":"yesterday"}`,
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got eventsv1.RunEvent
			err := tc.opts.Unmarshal([]byte(tc.in), &got)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("want an error, decoded %v", &got)
				}
				return
			}
			if err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !proto.Equal(tc.want, &got) {
				t.Fatalf("want %v\n got %v", tc.want, &got)
			}
		})
	}
}

// TestKindsMatchPayloads keeps the enum and the oneof in step: every kind but
// UNSPECIFIED and RAW has a payload case whose field name is the kind's
// subject token, and every payload case has such a kind.
func TestKindsMatchPayloads(t *testing.T) {
	md := (&eventsv1.RunEvent{}).ProtoReflect().Descriptor()
	oneof := md.Oneofs().ByName("payload")
	kinds := eventsv1.EventKind(0).Descriptor().Values()
	payloadless := map[eventsv1.EventKind]bool{
		eventsv1.EventKind_EVENT_KIND_UNSPECIFIED: true,
		eventsv1.EventKind_EVENT_KIND_RAW:         true,
	}
	seen := map[protoreflect.Name]bool{}
	for i := 0; i < kinds.Len(); i++ {
		k := eventsv1.EventKind(kinds.Get(i).Number())
		t.Run(k.String(), func(t *testing.T) {
			f := md.Fields().ByName(protoreflect.Name(k.SubjectToken()))
			if payloadless[k] {
				if f != nil && f.ContainingOneof() == oneof {
					t.Fatalf("%v has a payload case but is documented as payload-less", k)
				}
				return
			}
			if f == nil || f.ContainingOneof() != oneof {
				t.Fatalf("no payload case named %q for %v", k.SubjectToken(), k)
			}
			seen[f.Name()] = true
		})
	}
	for i := 0; i < oneof.Fields().Len(); i++ {
		if n := oneof.Fields().Get(i).Name(); !seen[n] {
			t.Errorf("payload case %q has no matching EventKind", n)
		}
	}
}

func TestSubject(t *testing.T) {
	tests := []struct {
		name string
		ev   *eventsv1.RunEvent
		want string
	}{
		{"kind token is lowercase without prefix", newEvent(eventsv1.EventKind_EVENT_KIND_TOOL_CALL, 1), "agents.team-a.fix-bug.tool_call"},
		{"single-word kind", newEvent(eventsv1.EventKind_EVENT_KIND_LIFECYCLE, 1), "agents.team-a.fix-bug.lifecycle"},
		{"dots in an agent name do not add tokens", &eventsv1.RunEvent{
			Run: &eventsv1.RunIdentity{Namespace: "ns", Agent: "nightly.build"}, Kind: eventsv1.EventKind_EVENT_KIND_RESULT,
		}, "agents.ns.nightly_build.result"},
		{"wildcards and whitespace are neutralized", &eventsv1.RunEvent{
			Run: &eventsv1.RunIdentity{Namespace: "a*b", Agent: "c> d\t"}, Kind: eventsv1.EventKind_EVENT_KIND_FILE,
		}, "agents.a_b.c__d_.file"},
		{"empty names become an underscore token", &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_BATCH}, "agents._._.batch"},
		{"nil event does not panic", nil, "agents._._.unspecified"},
		{"unknown kind number stays visible", &eventsv1.RunEvent{
			Run: &eventsv1.RunIdentity{Namespace: "ns", Agent: "a"}, Kind: eventsv1.EventKind(42),
		}, "agents.ns.a.42"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ev.Subject(); got != tc.want {
				t.Fatalf("Subject() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDedupeID(t *testing.T) {
	run := &eventsv1.RunIdentity{Uid: "u-1"}
	tests := []struct {
		name string
		ev   *eventsv1.RunEvent
		want string
	}{
		{"explicit id wins", &eventsv1.RunEvent{Run: run, Sequence: 3, Id: "custom"}, "custom"},
		{"derived from uid and sequence", &eventsv1.RunEvent{Run: run, Sequence: 18446744073709551615}, "u-1-18446744073709551615"},
		{"no uid gives no id", &eventsv1.RunEvent{Sequence: 3}, ""},
		{"sequence zero gives no id", &eventsv1.RunEvent{Run: run}, ""},
		{"nil event gives no id", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ev.DedupeID(); got != tc.want {
				t.Fatalf("DedupeID() = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzUnmarshalJSON feeds arbitrary bytes to protojson. Decoding must never
// panic; whatever decodes must encode again, and decoding that encoding must
// give the same encoding (so JSON relayed by a sink is stable).
func FuzzUnmarshalJSON(f *testing.F) {
	for _, tc := range samples(f) {
		b, err := protojson.Marshal(tc.ev)
		if err != nil {
			f.Fatalf("marshal seed %q: %v", tc.name, err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"kind":"EVENT_KIND_RAW"}`, `{"kind":99}`,
		`{"sequence":"18446744073709551616"}`, `{"time":"0001-01-01T00:00:00Z"}`,
		`{"usage":{"costUsd":"NaN"}}`, `{"toolCall":{"input":{"a":[{"b":null}]}}}`,
		`{"raw":"not base64!"}`, `{"message":{"text":"\ud800"}}`, `{"run":{"uid":"a.b*>"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range []protojson.UnmarshalOptions{{}, {DiscardUnknown: true}} {
			var ev eventsv1.RunEvent
			if err := opts.Unmarshal(data, &ev); err != nil {
				continue
			}
			_ = ev.Subject()
			_ = ev.DedupeID()
			out, err := protojson.Marshal(&ev)
			if err != nil {
				t.Fatalf("decoded %q but cannot encode it: %v", data, err)
			}
			var again eventsv1.RunEvent
			if err := protojson.Unmarshal(out, &again); err != nil {
				t.Fatalf("cannot decode our own encoding %s: %v", out, err)
			}
			out2, err := protojson.Marshal(&again)
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			if !bytes.Equal(out, out2) {
				t.Fatalf("encoding is not stable:\n%s\n%s", out, out2)
			}
		}
	})
}
