// Package turntest reads a realtime turn's Prompt stream in tests, from
// the public gateway (realtime.v1) or from a run pod's session server
// (supervisor.v1), whose messages have the same shape.
package turntest

import (
	"errors"
	"io"
	"testing"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// Message is one message of a Prompt stream: an event of the turn, or the
// TurnEnd (of type E) that closes it.
type Message[E comparable] interface {
	GetEvent() *eventsv1.RunEvent
	GetTurnEnd() E
}

// Stream is the client side of a Prompt stream.
type Stream[M any] interface {
	Recv() (M, error)
}

// Read reads stream to its end and returns the turn's events and its
// TurnEnd. It fails t unless every message carries an event or the
// TurnEnd, and exactly one TurnEnd comes, last. err is the stream's
// error, other than its end.
func Read[M Message[E], E comparable](t testing.TB, stream Stream[M]) (events []*eventsv1.RunEvent, end E, err error) {
	t.Helper()
	var none E
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if end == none {
				t.Fatalf("stream ended without a turn end after %d events", len(events))
			}
			return events, end, nil
		}
		if err != nil {
			return events, end, err
		}
		if end != none {
			t.Fatalf("message after the turn end: %v", m)
		}
		ev := m.GetEvent()
		if ev != nil {
			events = append(events, ev)
		}
		end = m.GetTurnEnd()
		if ev == nil && end == none {
			t.Fatalf("empty stream message")
		}
	}
}
