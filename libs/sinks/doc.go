// Package sinks delivers run events to the destinations an AgentDefinition
// names in output.sinks (stdout, http, file) and to the platform's NATS
// stream, after output.select filtering.
//
// Semantics follow the reference supervisor: stdout gets the vendor CLI's
// own line, bare (status.output consumers expect the tool's line), and
// every event whatever select says; the other sinks get the JSON envelope
// (events.Encode) of selected CLI events plus every lifecycle, file and
// batch event. The platform's NATS stream stores every event, unfiltered.
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

// Sink is one destination of run events. Deliver may block (network,
// disk); a Set calls it from the sink's own goroutine, one event at a
// time, in order. The event is shared and must not be modified.
type Sink interface {
	// Deliver sends one event; an error means it was not delivered (the
	// sink has already retried when it retries at all).
	Deliver(ctx context.Context, ev *eventsv1.RunEvent) error
	// Close releases the sink's resources; it may flush within ctx.
	Close(ctx context.Context) error
}
