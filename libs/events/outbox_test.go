package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// TestOutboxMessageCarriesTheWireFormat checks one message: binary data,
// the content type, the dedupe id and the run's subject.
func TestOutboxMessageCarriesTheWireFormat(t *testing.T) {
	ev := wireEvent(t)
	m, err := newOutbox(nil).message(ev, false)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != ev.Subject() {
		t.Fatalf("subject %q, want %q", m.Subject, ev.Subject())
	}
	if got := m.Header.Get(jetstream.MsgIDHeader); got != "u-1-1" {
		t.Fatalf("Nats-Msg-Id %q, want the dedupe id", got)
	}
	back, err := DecodeMessage(m.Data, m.Header)
	if err != nil || !proto.Equal(back, ev) {
		t.Fatalf("decoded %v, %v", back, err)
	}
	if m.Header.Get(ContentTypeHeader) != ContentTypeProtobuf {
		t.Fatalf("content type %q", m.Header.Get(ContentTypeHeader))
	}
}

// TestOutboxReuseLeavesNothingBehind checks the reused message: a message
// built after one without raw has no Raw-Dropped header, after one with
// a Nats-Msg-Id none when its event has no id, and the previous event's
// bytes do not leak into a shorter one's data.
func TestOutboxReuseLeavesNothingBehind(t *testing.T) {
	o := newOutbox(nil)
	big := wireEvent(t)
	if _, err := o.message(big, true); err != nil {
		t.Fatal(err)
	}
	if len(big.GetRaw()) == 0 {
		t.Fatal("dropping raw modified the caller's event")
	}
	small := &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_RAW}
	m, err := o.message(small, false)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(rawDroppedHeader) != "" || m.Header.Get(jetstream.MsgIDHeader) != "" {
		t.Fatalf("stale headers: %v", m.Header)
	}
	back, err := DecodeMessage(m.Data, m.Header)
	if err != nil || !proto.Equal(back, small) {
		t.Fatalf("decoded %v, %v", back, err)
	}
}

// TestOutboxKeyedMsgIDIsTheHMACOfTheDedupeID checks the keyed id against
// its definition, for several events in a row (the hash is reused).
func TestOutboxKeyedMsgIDIsTheHMACOfTheDedupeID(t *testing.T) {
	key := []byte("run-key")
	o := newOutbox(key)
	r := testRun()
	for range 3 {
		ev := r.Stamp(&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_Message{Message: &eventsv1.Message{Text: "hi"}}})
		m, err := o.message(ev, false)
		if err != nil {
			t.Fatal(err)
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(ev.DedupeID()))
		want := hex.EncodeToString(mac.Sum(nil)[:20])
		if got := m.Header.Get(jetstream.MsgIDHeader); got != want {
			t.Fatalf("event %d: Nats-Msg-Id %q, want %q", ev.GetSequence(), got, want)
		}
	}
}

// TestSubjectCacheFollowsTheRun checks the cached subject is the event's
// own whenever the run or the kind changes.
func TestSubjectCacheFollowsTheRun(t *testing.T) {
	var c subjectCache
	a := &eventsv1.RunIdentity{Namespace: "team", Agent: "fixer"}
	b := &eventsv1.RunIdentity{Namespace: "team", Agent: "other.agent"}
	for _, ev := range []*eventsv1.RunEvent{
		{Run: a, Kind: eventsv1.EventKind_EVENT_KIND_MESSAGE},
		{Run: a, Kind: eventsv1.EventKind_EVENT_KIND_USAGE},
		{Run: b, Kind: eventsv1.EventKind_EVENT_KIND_USAGE},
		{Run: a, Kind: eventsv1.EventKind_EVENT_KIND_MESSAGE},
		{Kind: eventsv1.EventKind_EVENT_KIND_RAW},
	} {
		if got, want := c.subject(ev), ev.Subject(); got != want {
			t.Fatalf("subject %q, want %q", got, want)
		}
	}
}
