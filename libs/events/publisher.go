package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentplane/agentplane/libs/ctxtime"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// Publisher defaults.
const (
	DefaultBuffer         = 8192
	DefaultAttemptTimeout = 5 * time.Second
	DefaultRetryBase      = 100 * time.Millisecond
	DefaultRetryMax       = 5 * time.Second
	// DefaultReconnectBuffer is what nats.go keeps while reconnecting; the
	// Publisher's own buffer is the real one, this covers the moment
	// before a disconnect is noticed.
	DefaultReconnectBuffer = 8 << 20
)

// ErrClosed is returned by Close when the Publisher was already closed.
var ErrClosed = errors.New("events: publisher closed")

// PublisherOptions configures NewPublisher. The zero value of every field
// takes its default.
type PublisherOptions struct {
	// URL of the NATS server(s), comma separated. Ignored when Conn is set.
	URL string
	// Conn is an existing connection to publish on; the Publisher does not
	// close it. When nil the Publisher connects to URL itself, retrying
	// forever in the background, and closes that connection on Close.
	Conn *nats.Conn
	// Name is the NATS connection name shown by the server's monitoring.
	Name string
	// Buffer is how many events may wait for NATS before Publish drops.
	Buffer int
	// AttemptTimeout bounds one publish attempt (send and ack), and the
	// wait for all the acks of a window (see MaxInFlight).
	AttemptTimeout time.Duration
	// MaxInFlight is how many events may await their ack at once. 1 (the
	// default) publishes strictly one after the other, which keeps the
	// stream in run order even across failures; more is much faster but
	// a failure mid-window can store an event after a later one (see
	// publishWindow).
	MaxInFlight int
	// RetryBase and RetryMax bound the exponential backoff between attempts.
	RetryBase, RetryMax time.Duration
	// Stream is the stream created when missing; zero uses StreamConfig(0, 0, 0).
	Stream jetstream.StreamConfig
	// NoStreamSetup publishes without first making sure the stream
	// exists: a run's credential may not manage streams, so the platform
	// creates the stream and runs only publish to it.
	NoStreamSetup bool
	// MsgIDKey, when set, makes every Nats-Msg-Id an HMAC of the event's
	// dedupe id under this key. JetStream de-duplicates across the whole
	// stream, so with predictable ids any client allowed to publish
	// anywhere in it could store a victim's ids first and get the
	// victim's real events dropped as duplicates.
	MsgIDKey []byte
	// ConnectOptions are appended to the Publisher's own nats options, so
	// they win.
	ConnectOptions []nats.Option
	// Logger receives connection and failure notices, never payloads.
	Logger *slog.Logger
}

// Stats are the Publisher's counters.
type Stats struct {
	// Published counts events the stream acknowledged (duplicates included).
	Published uint64
	// Duplicates counts acks saying the event was already stored.
	Duplicates uint64
	// Retried counts publish attempts after a failed one, including
	// rounds spent waiting for a lost connection.
	Retried uint64
	// Dropped counts events given up: buffer full, published after Close,
	// still unpublished when Close's context ended, or refused for good
	// (too large even without raw).
	Dropped uint64
	// Reordered counts events stored ahead of an earlier event whose
	// publish failed (only with MaxInFlight > 1).
	Reordered uint64
	// Buffered is how many events wait right now.
	Buffered int
}

// Publisher publishes run events to JetStream in the order Publish was
// called, each with its dedupe id as Nats-Msg-Id, retrying with backoff
// while NATS is away. Publish never blocks. Publishing is one event at a
// time (the next is sent once the previous is acknowledged), which is what
// keeps the stream's order equal to the run's order across retries.
type Publisher struct {
	opts    PublisherOptions
	nc      *nats.Conn
	ownConn bool
	js      jetstream.JetStream
	log     *slog.Logger

	mu     sync.RWMutex // guards closed against sends on ch
	closed bool
	ch     chan *eventsv1.RunEvent

	// loopCtx is the publishing loop's lifetime; Close ends it with
	// stopLoop.
	loopCtx  context.Context
	stopLoop context.CancelFunc
	done     chan struct{}

	streamReady bool       // only the loop goroutine touches it
	failing     bool       // ditto: logs an outage once, not per attempt
	out         *outbox    // ditto: the message being published
	acks        *ackWindow // ditto: the windows' acks, nil until the first

	// unreachable is set from the first failed connect or the disconnect
	// of an outage until a connection is made, so each outage is logged
	// once, not at every attempt.
	unreachable atomic.Bool

	published, duplicates, retried, dropped, reordered atomic.Uint64
}

// NewPublisher starts a Publisher. It does not wait for NATS: when the
// server is unreachable the connection and the stream are set up in the
// background while events queue.
func NewPublisher(opts PublisherOptions) (*Publisher, error) {
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = DefaultAttemptTimeout
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = DefaultRetryBase
	}
	if opts.RetryMax < opts.RetryBase {
		opts.RetryMax = max(DefaultRetryMax, opts.RetryBase)
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 1
	}
	if opts.Stream.Name == "" {
		opts.Stream = StreamConfig(0, 0, 0)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	p := &Publisher{
		opts: opts,
		log:  opts.Logger.With("component", "events-publisher"),
		ch:   make(chan *eventsv1.RunEvent, opts.Buffer),
		done: make(chan struct{}),
		out:  newOutbox(opts.MsgIDKey),
	}
	p.nc = opts.Conn
	if p.nc == nil {
		nc, err := nats.Connect(opts.URL, p.connectOptions()...)
		if err != nil {
			return nil, fmt.Errorf("connect to nats: %w", err)
		}
		p.nc, p.ownConn = nc, true
	}
	// Only publishOne and the stream setup use JetStream's client; the
	// windows read their acks themselves (ackWindow).
	js, err := jetstream.New(p.nc)
	if err != nil {
		if p.ownConn {
			p.nc.Close()
		}
		return nil, fmt.Errorf("jetstream context: %w", err)
	}
	p.js = js
	// The loop lives until Close, not as long as any caller's context.
	p.loopCtx, p.stopLoop = context.WithCancel(context.Background())
	go p.run(p.loopCtx)
	return p, nil
}

// connectOptions keep the connection alive for the whole run: retry the
// first connect, reconnect forever, keep a reconnect buffer.
func (p *Publisher) connectOptions() []nats.Option {
	o := []nats.Option{
		nats.Name(p.opts.Name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.ReconnectBufSize(DefaultReconnectBuffer),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			p.unreachable.Store(true)
			if err != nil {
				p.log.Warn("nats disconnected", "err", err)
			}
		}),
		// Called for every failed attempt, those of the first connect
		// included (which no disconnect announces): one line an outage.
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			if p.unreachable.CompareAndSwap(false, true) {
				p.log.Warn("nats unreachable; retrying in the background", "err", err)
			}
		}),
		nats.ConnectHandler(func(nc *nats.Conn) {
			if p.unreachable.Swap(false) {
				p.log.Info("nats connected", "server", nc.ConnectedUrlRedacted())
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			p.unreachable.Store(false)
			p.log.Info("nats reconnected", "server", nc.ConnectedUrlRedacted())
		}),
	}
	return append(o, p.opts.ConnectOptions...)
}

// Conn returns the NATS connection the Publisher uses.
func (p *Publisher) Conn() *nats.Conn { return p.nc }

// Publish queues ev and returns at once. It reports false when ev was
// dropped because the buffer is full or the Publisher is closed. The
// Publisher owns ev from here on: the caller must not modify it.
func (p *Publisher) Publish(ev *eventsv1.RunEvent) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.dropped.Add(1)
		return false
	}
	select {
	case p.ch <- ev:
		return true
	default:
		if p.dropped.Add(1) == 1 {
			// Later drops show in the counter; one line is enough to
			// tell an operator why events are missing.
			p.log.Warn("event buffer full, dropping events", "buffer", cap(p.ch))
		}
		return false
	}
}

// Close stops accepting events and publishes what is buffered until ctx
// ends; events left then are counted as dropped and reported in the error.
// A connection the Publisher opened itself is closed.
func (p *Publisher) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.closed = true
	close(p.ch)
	p.mu.Unlock()

	before := p.dropped.Load()
	stop := context.AfterFunc(ctx, p.stopLoop)
	<-p.done
	stop()
	p.stopLoop()
	if p.ownConn {
		p.nc.Close()
	}
	if lost := p.dropped.Load() - before; ctx.Err() != nil && lost > 0 {
		return fmt.Errorf("events: %d events not published before close: %w", lost, ctx.Err())
	}
	return nil
}

// Stats returns the current counters.
func (p *Publisher) Stats() Stats {
	return Stats{
		Published:  p.published.Load(),
		Duplicates: p.duplicates.Load(),
		Retried:    p.retried.Load(),
		Dropped:    p.dropped.Load(),
		Reordered:  p.reordered.Load(),
		Buffered:   len(p.ch),
	}
}

// run publishes queued events in order until the channel is closed and
// drained, or the loop is stopped (then the rest is counted as dropped).
// Windows are used only while healthy: the first event after a failure,
// before the stream is known to exist, goes one at a time. ctx is the
// loop's lifetime: Close cancels it when its own deadline passes.
func (p *Publisher) run(ctx context.Context) {
	defer close(p.done)
	defer func() {
		if p.acks != nil {
			p.acks.close()
		}
	}()
	batch := make([]*eventsv1.RunEvent, 0, p.opts.MaxInFlight)
	for ev := range p.ch {
		if ctx.Err() != nil {
			p.dropped.Add(1)
			continue
		}
		if p.opts.MaxInFlight == 1 || !p.streamReady || p.failing || !p.nc.IsConnected() {
			p.publishOne(ctx, ev)
			continue
		}
		batch = append(batch[:0], ev)
	fill:
		for len(batch) < p.opts.MaxInFlight {
			select {
			case next, ok := <-p.ch:
				if !ok {
					break fill
				}
				batch = append(batch, next)
			default:
				break fill
			}
		}
		p.publishWindow(ctx, batch)
	}
}

// publishOne retries ev until it is acknowledged, refused for good, or the
// loop is stopped (ctx ends).
func (p *Publisher) publishOne(ctx context.Context, ev *eventsv1.RunEvent) {
	msg, err := p.out.message(ev, false)
	if err != nil {
		p.drop(ev, err)
		return
	}
	backoff := retryBackoff(p.opts.RetryBase, p.opts.RetryMax)
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			p.retried.Add(1)
			if !ctxtime.Sleep(ctx, backoff.Step()) {
				p.dropped.Add(1)
				return
			}
		}
		// While disconnected an attempt would only pile another copy into
		// nats.go's reconnect buffer; wait for the connection instead.
		if !p.nc.IsConnected() {
			p.noteFailure(nats.ErrConnectionReconnecting)
			continue
		}
		err := p.attempt(ctx, msg)
		if err == nil {
			if p.failing {
				p.failing = false
				p.log.Info("nats publishing recovered")
			}
			return
		}
		if tooLarge(err) && len(ev.GetRaw()) > 0 && msg.Header.Get(rawDroppedHeader) == "" {
			// The vendor's original line is optional; the typed payload
			// is what consumers need, so shed raw rather than the event.
			if msg, err = p.out.message(ev, true); err != nil {
				p.drop(ev, err)
				return
			}
			continue
		}
		if permanent(err) {
			p.drop(ev, err)
			return
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) {
			p.streamReady = false
		}
		p.noteFailure(err)
	}
}

// attempt makes sure the stream exists, then publishes msg once.
func (p *Publisher) attempt(ctx context.Context, msg *nats.Msg) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.AttemptTimeout)
	defer cancel()
	if !p.streamReady {
		if !p.opts.NoStreamSetup {
			err := EnsureStream(ctx, p.js, p.opts.Stream)
			if errors.Is(err, ErrStreamSubjects) {
				// An operator's choice; refusing to publish would lose
				// every event instead of some.
				p.log.Warn("using existing stream", "err", err)
			} else if err != nil {
				return err
			}
		}
		p.streamReady = true
	}
	ack, err := p.js.PublishMsg(ctx, msg)
	if err != nil {
		return fmt.Errorf("publish %s: %w", msg.Subject, err)
	}
	p.published.Add(1)
	if ack.Duplicate {
		p.duplicates.Add(1)
	}
	return nil
}

// noteFailure logs the first failure of an outage; later attempts only
// count, so a long outage does not flood the log.
func (p *Publisher) noteFailure(err error) {
	if !p.failing {
		p.failing = true
		p.log.Warn("nats publish failing, retrying with backoff", "err", err)
	}
}

// drop gives up on ev. The log names the event, never its content.
func (p *Publisher) drop(ev *eventsv1.RunEvent, err error) {
	p.dropped.Add(1)
	p.log.Error("dropping run event", "id", ev.DedupeID(), "kind", ev.GetKind().SubjectToken(), "err", err)
}

// tooLarge reports a message over the server's or the stream's size limit.
func tooLarge(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, nats.ErrMaxPayload) ||
		(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum)
}

// permanent reports errors a retry cannot fix. A JetStream API error with a
// 4xx code is a refusal of this message; 503 and timeouts are transient.
func permanent(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code >= 400 && apiErr.Code < 500
	}
	return errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) ||
		errors.Is(err, nats.ErrInvalidMsg)
}

// retryBackoff is the schedule of waits between attempts at one event:
// doubling from base up to limit, with "equal jitter" (each wait drawn
// from the upper half of its step) so many pods reconnecting after an
// outage do not retry in lockstep. wait.Backoff adds its jitter on top of
// the duration, so it steps through the halves with a jitter of 1; the
// halves are at least 1ns so the waits still grow from a tiny base.
func retryBackoff(base, limit time.Duration) wait.Backoff {
	return wait.Backoff{Duration: max(base/2, 1), Factor: 2, Jitter: 1, Cap: max(limit/2, 1), Steps: math.MaxInt}
}
