package sinks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// DefaultQueueSize is each sink's queue length in a Set.
const DefaultQueueSize = 1024

// Member is one sink of a Set.
type Member struct {
	// Name labels the sink in logs and metrics ("stdout", "http-0", ...);
	// never a url, which may hold credentials.
	Name string
	// Sink receives the events.
	Sink Sink
	// Unfiltered members get every event whatever output.select says:
	// stdout (the log tail is the whole run) and the platform's stream.
	Unfiltered bool
	// QueueSize overrides SetOptions.QueueSize for this member.
	QueueSize int
}

// SetOptions configures NewSet.
type SetOptions struct {
	// Select filters CLI events for the members that are not Unfiltered.
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
// and counts it. A Set is itself a Sink.
type Set struct {
	matcher *Matcher
	workers []*worker
	log     *slog.Logger

	mu     sync.RWMutex // guards closed against sends on the queues
	closed bool

	ctx    context.Context // cancelled when Close gives up on flushing
	cancel context.CancelFunc
}

type worker struct {
	Member
	ch                         chan *eventsv1.RunEvent
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
		w := &worker{Member: m, ch: make(chan *eventsv1.RunEvent, q), done: make(chan struct{})}
		s.workers = append(s.workers, w)
		go s.run(w)
	}
	return s
}

// Deliver queues ev for every member it is for and returns at once. It
// returns ErrDropped when some member's queue was full (the others still
// got the event). ctx is not used: delivery happens later, bounded by
// Close's context.
func (s *Set) Deliver(_ context.Context, ev *eventsv1.RunEvent) error {
	selected := s.matcher.Match(ev)
	s.mu.RLock()
	defer s.mu.RUnlock()
	var dropped bool
	for _, w := range s.workers {
		if !selected && !w.Unfiltered {
			continue
		}
		if s.closed {
			w.dropped.Add(1)
			dropped = true
			continue
		}
		select {
		case w.ch <- ev:
		default:
			dropped = true
			if w.dropped.Add(1) == 1 {
				s.log.Warn("sink queue full, dropping events", "sink", w.Name, "queue", cap(w.ch))
			}
		}
	}
	if dropped {
		return ErrDropped
	}
	return nil
}

// run delivers one member's events in order until its queue is closed.
func (s *Set) run(w *worker) {
	defer close(w.done)
	for ev := range w.ch {
		if s.ctx.Err() != nil {
			w.dropped.Add(1) // Close gave up: count what is left
			continue
		}
		if err := w.Sink.Deliver(s.ctx, ev); err != nil {
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
		if err := w.Sink.Close(ctx); err != nil {
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
