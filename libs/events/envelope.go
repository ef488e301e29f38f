package events

import (
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// Run stamps the events of one run: the same identity on every event, a
// sequence that starts at 1 and grows by one per event, the time and the
// dedupe id "<uid>-<sequence>". It is safe for concurrent use; concurrent
// callers get distinct sequence numbers, but the order they are delivered in
// is then up to them, so a producer that cares about order stamps from one
// goroutine.
type Run struct {
	identity *eventsv1.RunIdentity
	vendor   string
	seq      atomic.Uint64
	now      func() time.Time
}

// RunOption customises a Run.
type RunOption func(*Run)

// WithVendor sets the vendor CLI name (claude, codex, ...) on every event
// that does not set one itself.
func WithVendor(vendor string) RunOption { return func(r *Run) { r.vendor = vendor } }

// WithClock replaces time.Now, so tests get stable timestamps.
func WithClock(now func() time.Time) RunOption { return func(r *Run) { r.now = now } }

// WithStartSequence makes the first stamped event get sequence last+1. A
// producer that continues a run another process started (the supervisor
// after the init container) uses it so sequences do not restart at 1.
func WithStartSequence(last uint64) RunOption { return func(r *Run) { r.seq.Store(last) } }

// NewRun returns a Run for identity. The identity is shared by every event
// the Run stamps (not copied), so callers must not modify it afterwards.
func NewRun(identity *eventsv1.RunIdentity, opts ...RunOption) *Run {
	r := &Run{identity: identity, now: time.Now}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Identity returns the run identity every event carries.
func (r *Run) Identity() *eventsv1.RunIdentity { return r.identity }

// LastSequence returns the sequence of the most recently stamped event, 0
// before the first.
func (r *Run) LastSequence() uint64 { return r.seq.Load() }

// Stamp fills the envelope fields of ev in place and returns it: run,
// sequence, time (kept when the producer already set it), id, vendor (when
// empty) and kind (derived from the payload when unspecified). A parser
// builds the payload, Stamp makes it an event of this run.
func (r *Run) Stamp(ev *eventsv1.RunEvent) *eventsv1.RunEvent {
	ev.Run = r.identity
	ev.Sequence = r.seq.Add(1)
	if ev.Time == nil {
		ev.Time = timestamppb.New(r.now())
	}
	if ev.Kind == eventsv1.EventKind_EVENT_KIND_UNSPECIFIED {
		ev.Kind = KindOf(ev)
	}
	if ev.Vendor == "" {
		ev.Vendor = r.vendor
	}
	// Clear first so DedupeID derives it from this run's uid and sequence
	// rather than returning an id a caller reused from another event.
	ev.Id = ""
	ev.Id = ev.DedupeID()
	return ev
}

// Lifecycle returns a stamped lifecycle event, such as phase "agent" with
// status "started".
func (r *Run) Lifecycle(lc *eventsv1.Lifecycle) *eventsv1.RunEvent {
	return r.Stamp(&eventsv1.RunEvent{
		Kind:    eventsv1.EventKind_EVENT_KIND_LIFECYCLE,
		Payload: &eventsv1.RunEvent_Lifecycle{Lifecycle: lc},
	})
}

// KindOf returns the kind that matches ev's payload case, RAW when there is
// no payload.
func KindOf(ev *eventsv1.RunEvent) eventsv1.EventKind {
	switch ev.GetPayload().(type) {
	case *eventsv1.RunEvent_Lifecycle:
		return eventsv1.EventKind_EVENT_KIND_LIFECYCLE
	case *eventsv1.RunEvent_Message:
		return eventsv1.EventKind_EVENT_KIND_MESSAGE
	case *eventsv1.RunEvent_ToolCall:
		return eventsv1.EventKind_EVENT_KIND_TOOL_CALL
	case *eventsv1.RunEvent_ToolResult:
		return eventsv1.EventKind_EVENT_KIND_TOOL_RESULT
	case *eventsv1.RunEvent_Usage:
		return eventsv1.EventKind_EVENT_KIND_USAGE
	case *eventsv1.RunEvent_Result:
		return eventsv1.EventKind_EVENT_KIND_RESULT
	case *eventsv1.RunEvent_File:
		return eventsv1.EventKind_EVENT_KIND_FILE
	case *eventsv1.RunEvent_Batch:
		return eventsv1.EventKind_EVENT_KIND_BATCH
	default:
		return eventsv1.EventKind_EVENT_KIND_RAW
	}
}

// IsCLIEvent reports whether ev came from the vendor CLI's output (message,
// tool call, tool result, usage, result or an unclassified raw line) rather
// than from the run itself (lifecycle, file, batch). output.select filters
// only CLI events.
func IsCLIEvent(ev *eventsv1.RunEvent) bool {
	switch ev.GetKind() {
	case eventsv1.EventKind_EVENT_KIND_LIFECYCLE, eventsv1.EventKind_EVENT_KIND_FILE,
		eventsv1.EventKind_EVENT_KIND_BATCH:
		return false
	default:
		return true
	}
}

// marshal is the one JSON mapping used on the wire: compact (one line, so
// a JSON-lines file stays one event per line) with protojson's canonical
// lowerCamelCase field names and enum names.
var marshal = protojson.MarshalOptions{}

// unmarshal accepts fields a newer producer added.
var unmarshal = protojson.UnmarshalOptions{DiscardUnknown: true}

// Encode returns the wire JSON of ev: what NATS messages, the http and file
// sinks carry. The output is a single line.
func Encode(ev *eventsv1.RunEvent) ([]byte, error) {
	b, err := marshal.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode run event: %w", err)
	}
	return b, nil
}

// AppendEncode appends the wire JSON of ev to dst, so hot paths can reuse a
// buffer.
func AppendEncode(dst []byte, ev *eventsv1.RunEvent) ([]byte, error) {
	b, err := marshal.MarshalAppend(dst, ev)
	if err != nil {
		return dst, fmt.Errorf("encode run event: %w", err)
	}
	return b, nil
}

// Decode parses wire JSON produced by Encode. Unknown fields are ignored so
// old consumers read new producers' events.
func Decode(data []byte) (*eventsv1.RunEvent, error) {
	ev := &eventsv1.RunEvent{}
	if err := unmarshal.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("decode run event: %w", err)
	}
	return ev, nil
}
