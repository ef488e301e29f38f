package sinks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/libs/events"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// DefaultQueueSize is each sink's queue length in a Set.
const DefaultQueueSize = 1024

// Member is one sink of a Set: either an event sink, which gets every
// event (stdout, the platform's stream), or a payload sink, which gets the
// sink payloads of the events output.select passes (http, file, nats).
type Member struct {
	// Name labels the sink in logs and metrics ("stdout", "http-0", ...);
	// never a url, which may hold credentials.
	Name string
	// Sink, when set, receives every event whatever output.select says.
	Sink Sink
	// Payloads, when set (and Sink is not), receives one sink payload per
	// selected CLI line and per lifecycle, file and batch event.
	Payloads PayloadSink
	// QueueSize overrides SetOptions.QueueSize for this member.
	QueueSize int
}

// SetOptions configures NewSet.
type SetOptions struct {
	// Select filters CLI lines for the payload sinks.
	Select Select
	// QueueSize is each member's queue length; 0 is DefaultQueueSize.
	QueueSize int
	// Logger receives delivery failures and drops (never event content).
	Logger *slog.Logger
}

// MemberStats are one member's counters.
type MemberStats struct {
	Name                       string
	Delivered, Failed, Dropped uint64
}

// Set fans events out to its members. Deliver never blocks: each member
// has a bounded queue drained by its own goroutine, in order, so a slow
// member delays only itself; a member whose queue is full loses the event
// and counts it.
type Set struct {
	matcher  *Matcher
	workers  []*worker
	payloads bool // some member takes payloads
	log      *slog.Logger

	mu     sync.RWMutex // guards closed against sends on the queues
	closed bool

	ctx    context.Context // cancelled when Close gives up on flushing
	cancel context.CancelFunc
}

type worker struct {
	Member
	ch                         chan item
	done                       chan struct{}
	delivered, failed, dropped atomic.Uint64
}

// NewSet starts one goroutine per member.
func NewSet(members []Member, opts SetOptions) *Set {
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Set{matcher: NewMatcher(opts.Select), log: opts.Logger.With("component", "sinks")}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, m := range members {
		q := m.QueueSize
		if q <= 0 {
			q = opts.QueueSize
		}
		w := &worker{Member: m, ch: make(chan item, q), done: make(chan struct{})}
		s.workers = append(s.workers, w)
		s.payloads = s.payloads || m.Sink == nil
		go s.run(w)
	}
	return s
}

// item is one queued delivery: an event for event sinks, a payload for
// payload sinks.
type item struct {
	ev      *eventsv1.RunEvent
	payload []byte
}

// Deliver queues ev for every member it is for and returns at once: a
// lifecycle, file or batch event, or a CLI event standing alone (a CLI
// line's events go through DeliverLine). It returns ErrDropped when some
// member's queue was full (the others still got the event), and
// ErrEnveloped for a CLI line that already is a sink payload, which the
// payload sinks do not get. ctx is not used: delivery happens later,
// bounded by Close's context.
func (s *Set) Deliver(_ context.Context, ev *eventsv1.RunEvent) error {
	return s.deliver([]*eventsv1.RunEvent{ev}, ev.GetRaw())
}

// DeliverLine queues the events one vendor CLI line produced (in order;
// the parser gives at least one). Event sinks get each event; payload
// sinks get one payload for the line when output.select passes any of
// its events, so receivers see each line once, as the CLI printed it.
func (s *Set) DeliverLine(line []byte, evs []*eventsv1.RunEvent) error {
	if len(evs) == 0 {
		return nil
	}
	return s.deliver(evs, line)
}

// DeliverAll queues a run's events in order, grouping the events of one
// CLI line by the producers' convention that only a line's first event
// carries the line (RunEvent.raw).
func (s *Set) DeliverAll(evs []*eventsv1.RunEvent) error {
	var errs []error
	for i := 0; i < len(evs); {
		j := i + 1
		if events.IsCLIEvent(evs[i]) && len(evs[i].GetRaw()) > 0 {
			for j < len(evs) && events.IsCLIEvent(evs[j]) && len(evs[j].GetRaw()) == 0 {
				j++
			}
		}
		if err := s.deliver(evs[i:j], evs[i].GetRaw()); err != nil {
			errs = append(errs, err)
		}
		i = j
	}
	return errors.Join(errs...)
}

func (s *Set) deliver(evs []*eventsv1.RunEvent, line []byte) error {
	selected := false
	for _, ev := range evs {
		// The matcher sees every event, in order (it remembers tool calls).
		if s.matcher.Match(ev) {
			selected = true
		}
	}
	var payload []byte
	var encErr error
	if selected && s.payloads {
		payload, encErr = AppendPayload(nil, evs[0], line)
		if encErr != nil {
			payload = nil
			s.log.Warn("a CLI event is not sent to the output sinks", "err", encErr)
		}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var dropped bool
	for _, w := range s.workers {
		var items []item
		switch {
		case w.Sink != nil:
			for _, ev := range evs {
				items = append(items, item{ev: ev})
			}
		case payload != nil:
			items = []item{{payload: payload}}
		}
		for _, it := range items {
			if s.closed {
				w.dropped.Add(1)
				dropped = true
				continue
			}
			select {
			case w.ch <- it:
			default:
				dropped = true
				if w.dropped.Add(1) == 1 {
					s.log.Warn("sink queue full, dropping events", "sink", w.Name, "queue", cap(w.ch))
				}
			}
		}
	}
	switch {
	case encErr != nil:
		return encErr
	case dropped:
		return ErrDropped
	}
	return nil
}

// run delivers one member's events in order until its queue is closed.
func (s *Set) run(w *worker) {
	defer close(w.done)
	for it := range w.ch {
		if s.ctx.Err() != nil {
			w.dropped.Add(1) // Close gave up: count what is left
			continue
		}
		var err error
		if w.Sink != nil {
			err = w.Sink.Deliver(s.ctx, it.ev)
		} else {
			err = w.Payloads.DeliverPayload(s.ctx, it.payload)
		}
		if err != nil {
			// First failure, then every 100th: enough to diagnose without
			// a line per event from a sink that is down.
			if n := w.failed.Add(1); n == 1 || n%100 == 0 {
				s.log.Warn("sink delivery failed", "sink", w.Name, "failures", n, "err", err)
			}
			continue
		}
		w.delivered.Add(1)
	}
}

// Close stops accepting events, lets every member finish its queue until
// ctx ends (then the rest is dropped and counted), and closes the members.
// It returns ctx's error when it had to give up on queued events.
func (s *Set) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, w := range s.workers {
		close(w.ch)
	}
	s.mu.Unlock()

	var errs []error
	for _, w := range s.workers {
		select {
		case <-w.done:
		case <-ctx.Done():
			s.cancel()
		}
	}
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("sinks: not all events delivered before close: %w", ctx.Err()))
	}
	for _, w := range s.workers {
		var err error
		if w.Sink != nil {
			err = w.Sink.Close(ctx)
		} else {
			err = w.Payloads.Close(ctx)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("close sink %s: %w", w.Name, err))
		}
	}
	s.cancel()
	return errors.Join(errs...)
}

// Stats returns each member's counters, in member order.
func (s *Set) Stats() []MemberStats {
	out := make([]MemberStats, 0, len(s.workers))
	for _, w := range s.workers {
		out = append(out, MemberStats{Name: w.Name, Delivered: w.delivered.Load(), Failed: w.failed.Load(), Dropped: w.dropped.Load()})
	}
	return out
}

// Metric descriptors of a Set; the caller registers the Set (a
// prometheus.Collector) on its own registry.
var (
	descDelivered = prometheus.NewDesc("agentplane_sink_delivered_total",
		"Run events a sink delivered.", []string{"sink"}, nil)
	descFailed = prometheus.NewDesc("agentplane_sink_failed_total",
		"Run events a sink failed to deliver after its retries.", []string{"sink"}, nil)
	descDropped = prometheus.NewDesc("agentplane_sink_dropped_total",
		"Run events dropped because a sink's queue was full or the set closed.", []string{"sink"}, nil)
)

// Describe implements prometheus.Collector.
func (s *Set) Describe(ch chan<- *prometheus.Desc) {
	ch <- descDelivered
	ch <- descFailed
	ch <- descDropped
}

// Collect implements prometheus.Collector.
func (s *Set) Collect(ch chan<- prometheus.Metric) {
	for _, st := range s.Stats() {
		ch <- prometheus.MustNewConstMetric(descDelivered, prometheus.CounterValue, float64(st.Delivered), st.Name)
		ch <- prometheus.MustNewConstMetric(descFailed, prometheus.CounterValue, float64(st.Failed), st.Name)
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(st.Dropped), st.Name)
	}
}
