package events

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

func testRun() *Run {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return NewRun(&eventsv1.RunIdentity{Namespace: "team", Agent: "fixer", Uid: "u-1", Station: "s", TaskId: "t"},
		WithVendor("claude"), WithClock(func() time.Time { return at }))
}

func TestStamp(t *testing.T) {
	r := testRun()
	for want := uint64(1); want <= 3; want++ {
		ev := r.Stamp(&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_Message{Message: &eventsv1.Message{Text: "hi"}}, Id: "stale"})
		if ev.GetSequence() != want {
			t.Fatalf("sequence starts at 1 and grows by one: got %d want %d", ev.GetSequence(), want)
		}
		if got := ev.GetId(); got != "u-1-"+strconv.FormatUint(want, 10) {
			t.Fatalf("dedupe id is <uid>-<sequence>: got %q", got)
		}
		if ev.GetKind() != eventsv1.EventKind_EVENT_KIND_MESSAGE {
			t.Fatalf("kind derived from payload: got %v", ev.GetKind())
		}
		if ev.GetVendor() != "claude" || ev.GetTime() == nil || ev.GetRun().GetUid() != "u-1" {
			t.Fatalf("envelope fields not filled: %v", ev)
		}
	}
	if r.LastSequence() != 3 {
		t.Fatalf("LastSequence = %d", r.LastSequence())
	}
	r2 := NewRun(r.Identity(), WithStartSequence(41))
	if got := r2.Lifecycle(&eventsv1.Lifecycle{Phase: "agent", Status: "started"}).GetSequence(); got != 42 {
		t.Fatalf("WithStartSequence continues a run: got %d", got)
	}
}

func TestKindOfNoPayloadIsRaw(t *testing.T) {
	if k := KindOf(&eventsv1.RunEvent{}); k != eventsv1.EventKind_EVENT_KIND_RAW {
		t.Fatalf("got %v", k)
	}
}

func TestEncodeRoundTripIsOneLine(t *testing.T) {
	ev := testRun().Stamp(&eventsv1.RunEvent{
		Raw:     []byte("{\"type\":\"x\"}\n"),
		Payload: &eventsv1.RunEvent_Message{Message: &eventsv1.Message{Role: "assistant", Text: "line1\nline2"}},
	})
	b, err := Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsRune(b, '\n') {
		t.Fatalf("wire JSON must be a single line: %s", b)
	}
	back, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(ev, back) {
		t.Fatalf("round trip changed the event:\n%v\n%v", ev, back)
	}
	if _, err := Decode([]byte(`{"kind":"EVENT_KIND_MESSAGE","futureField":1}`)); err != nil {
		t.Fatalf("unknown fields from newer producers are ignored: %v", err)
	}
	if _, err := Decode([]byte(`{`)); err == nil {
		t.Fatal("malformed JSON is an error")
	}
}

func TestSubjects(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"one run of one agent", Filter{Namespace: "team", Agent: "fixer"}.Subject(), "agents.team.fixer.>"},
		{"dotted agent names become one token", Filter{Namespace: "team", Agent: "a.b"}.Subject(), "agents.team.a_b.>"},
		{"namespace only", Filter{Namespace: "team"}.Subject(), "agents.team.>"},
		{"everything", Filter{}.Subject(), "agents.>"},
		{"batch notice", BatchSubject("team", "fixer"), "agentplane.batch.team.fixer"},
		{"batch notice wildcard", BatchSubject("team", ""), "agentplane.batch.team.*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %q want %q", tt.got, tt.want)
			}
		})
	}
}

// TestRetryBackoffGrowsToItsCapWithEqualJitter checks every wait lies in
// the upper half of its step, the step doubling from the base up to the
// limit and staying there.
func TestRetryBackoffGrowsToItsCapWithEqualJitter(t *testing.T) {
	for _, c := range []struct{ base, limit time.Duration }{
		{100 * time.Millisecond, 5 * time.Second},
		{2 * time.Microsecond, time.Millisecond},
		{time.Second, time.Second},
	} {
		b := retryBackoff(c.base, c.limit)
		step := c.base
		for n := 1; n < 200; n++ {
			if d := b.Step(); d < step/2 || d > step {
				t.Fatalf("base %v, limit %v: wait %d = %v, want within [%v, %v]", c.base, c.limit, n, d, step/2, step)
			}
			step = min(2*step, c.limit)
		}
	}
	// A base too small to halve still grows rather than retrying at once
	// forever.
	b := retryBackoff(time.Nanosecond, time.Microsecond)
	var last time.Duration
	for range 200 {
		if last = b.Step(); last <= 0 || last > time.Microsecond {
			t.Fatalf("tiny base: wait %v outside (0, 1µs]", last)
		}
	}
	if last < time.Microsecond/2 {
		t.Fatalf("tiny base: wait %v never reached the limit's half", last)
	}
}
