package runspec

import (
	"encoding/json"
	"errors"
	"fmt"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// A run pod lives for minutes, too short to be scraped, so the supervisor
// leaves its delivery figures where the Kubernetes API keeps them after the
// pod ended: its container's termination message, which the kubelet copies
// into the container's status (State.Terminated.Message). The
// agent-controller reads them when it reads the finished pod back and
// counts them into its metrics (docs/supervisor.md, docs/agent-controller.md).

// DefaultTerminationLog is where the supervisor writes its Summary: the
// Kubernetes default terminationMessagePath.
const DefaultTerminationLog = "/dev/termination-log"

// MaxSummaryBytes is the most of a termination message file the kubelet
// reads; a Summary is far smaller, and a longer message is not one.
const MaxSummaryBytes = 4096

// SummarySchema marks a termination message as a Summary, so another
// message (the log tail the kubelet substitutes under
// terminationMessagePolicy FallbackToLogsOnError) is never read as one.
const SummarySchema = "agentplane.run-summary/v1"

// Summary is one supervisor process's delivery figures: counts only, never
// a sink's address or a secret.
type Summary struct {
	// Schema is SummarySchema.
	Schema string `json:"schema"`
	// Events counts the events the process emitted, by kind, as the kind
	// reads in a NATS subject (eventsv1.EventKind.SubjectToken).
	Events map[string]uint64 `json:"events,omitempty"`
	// NATSDropped counts events the NATS publisher gave up.
	NATSDropped uint64 `json:"natsDropped,omitempty"`
	// SinkFailed counts deliveries to the recipe's sinks that failed, over
	// every sink.
	SinkFailed uint64 `json:"sinkFailed,omitempty"`
	// SinkDropped counts events the recipe's sinks dropped (a full queue,
	// or still queued when the process ended), over every sink.
	SinkDropped uint64 `json:"sinkDropped,omitempty"`
}

// Encode returns the Summary as the termination message, stamped with
// SummarySchema.
func (s Summary) Encode() ([]byte, error) {
	s.Schema = SummarySchema
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode run summary: %w", err)
	}
	if len(raw) > MaxSummaryBytes {
		return nil, fmt.Errorf("run summary is %d bytes, over the %d-byte limit of a termination message", len(raw), MaxSummaryBytes)
	}
	return raw, nil
}

// ParseSummary reads a termination message written by Encode. The message
// comes from the run pod, so it is checked: a message over MaxSummaryBytes,
// not JSON, or without SummarySchema is an error, and a kind this build
// does not know is left out, so that what becomes a metric label is one of
// a known few.
func ParseSummary(msg string) (Summary, error) {
	if len(msg) > MaxSummaryBytes {
		return Summary{}, fmt.Errorf("run summary: %d bytes, over %d", len(msg), MaxSummaryBytes)
	}
	var s Summary
	if err := json.Unmarshal([]byte(msg), &s); err != nil {
		return Summary{}, fmt.Errorf("run summary: %w", err)
	}
	if s.Schema != SummarySchema {
		return Summary{}, errors.New("run summary: not a " + SummarySchema + " message")
	}
	for kind := range s.Events {
		if !KnownEventKind(kind) {
			delete(s.Events, kind)
		}
	}
	return s, nil
}

// KnownEventKind reports whether token is the subject token of an event
// kind this build names (EVENT_KIND_UNSPECIFIED excepted).
func KnownEventKind(token string) bool {
	for v := range eventsv1.EventKind_name {
		if k := eventsv1.EventKind(v); k != eventsv1.EventKind_EVENT_KIND_UNSPECIFIED && k.SubjectToken() == token {
			return true
		}
	}
	return false
}

// Add returns the sum of s and o: a pod's init and agent containers each
// leave their own.
func (s Summary) Add(o Summary) Summary {
	sum := Summary{Schema: SummarySchema, NATSDropped: s.NATSDropped + o.NATSDropped,
		SinkFailed: s.SinkFailed + o.SinkFailed, SinkDropped: s.SinkDropped + o.SinkDropped}
	for _, m := range []map[string]uint64{s.Events, o.Events} {
		for k, n := range m {
			if sum.Events == nil {
				sum.Events = map[string]uint64{}
			}
			sum.Events[k] += n
		}
	}
	return sum
}
