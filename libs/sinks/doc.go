// Package sinks delivers run events to the destinations an AgentDefinition
// names in output.sinks (stdout, http, file, nats) and to the platform's
// NATS stream, after output.select filtering.
//
// stdout gets every event whatever select says, bare: the vendor CLI's own
// line (status.output consumers expect the tool's line) and the event
// object of the run's own events. The http, file and nats sinks get the
// sink payload (Payload, docs/events.md) of selected CLI lines plus every
// lifecycle, file and batch event; a nats sink publishes it with core NATS
// on agentplane.sinks.<namespace>.<subject>, the only sink subjects the
// run's credential may publish to. The platform's NATS stream stores every
// event, unfiltered, as the protobuf RunEvent.
//
// A Set fans each event out to its sinks through one bounded queue and
// worker per sink, so a slow or failing sink never stalls the caller or
// the other sinks; when a queue is full the event is dropped for that sink
// and counted.
package sinks

import (
	"context"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// Sink is a destination of run events themselves: stdout and the
// platform's stream. Deliver may block (network, disk); a Set calls it from
// the sink's own goroutine, one event at a time, in order. The event is
// shared and must not be modified.
type Sink interface {
	// Deliver sends one event; an error means it was not delivered (the
	// sink has already retried when it retries at all).
	Deliver(ctx context.Context, ev *eventsv1.RunEvent) error
	// Close releases the sink's resources; it may flush within ctx.
	Close(ctx context.Context) error
}

// PayloadSink is a destination of sink payloads (see Payload): the http,
// file and nats sinks of output.sinks. The payload is shared and must not be
// modified.
type PayloadSink interface {
	// DeliverPayload sends one payload (JSON, without a newline).
	DeliverPayload(ctx context.Context, payload []byte) error
	// Close releases the sink's resources; it may flush within ctx.
	Close(ctx context.Context) error
}
