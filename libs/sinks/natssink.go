package sinks

import (
	"context"
	"errors"

	"github.com/agentplane/agentplane/libs/events"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// ErrDropped is returned when a sink had to drop an event (a full buffer).
var ErrDropped = errors.New("sinks: event dropped")

// NATS hands events to an events.Publisher, which stores them in the
// AGENT_EVENTS stream. Deliver never blocks: the Publisher buffers and
// retries on its own.
type NATS struct {
	p *events.Publisher
}

// NewNATS returns a NATS sink publishing through p. The sink does not own
// p: closing the sink does not close the Publisher, whose owner flushes it.
func NewNATS(p *events.Publisher) *NATS { return &NATS{p: p} }

// Deliver implements Sink.
func (s *NATS) Deliver(_ context.Context, ev *eventsv1.RunEvent) error {
	if !s.p.Publish(ev) {
		return ErrDropped
	}
	return nil
}

// Close implements Sink.
func (s *NATS) Close(context.Context) error { return nil }
