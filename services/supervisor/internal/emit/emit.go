// Package emit delivers one run's events: it stamps them (libs/events Run),
// echoes them to the container's stdout, hands them to the recipe's sinks
// (libs/sinks, output.select applied) and to the platform's NATS stream.
// Both `supervisor init` and `supervisor run` use it, and the sequence
// carries over from one to the other through a small file, so every event
// of a run has a distinct dedupe id.
package emit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/sinks"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/services/supervisor/internal/runenv"
)

// Publisher tuning for a run pod. The stream is a run's only durable
// record, so the buffer is generous; MaxInFlight lets acks overlap, which
// is what makes the publisher keep up with a chatty CLI (one ack per
// round trip tops out near 15k events/s on a laptop). Order is kept while
// NATS is healthy; a failure mid-window can store an event after a later
// one, which consumers fix by sequence (see events.Publisher).
const (
	PublishBuffer      = 1 << 15
	PublishMaxInFlight = 256
	// SinkQueue is each recipe sink's queue length.
	SinkQueue = 4096
)

// SequenceFile is the file, under the agent dir, holding the last
// sequence number the init container stamped, so the run continues after
// it.
const SequenceFile = ".agentplane/sequence"

// StartedFile is the file, under the agent dir, where the init container
// records when it started (Unix milliseconds): the run's deadline counts
// from there, as the Job's does.
const StartedFile = ".agentplane/started-at"

// Options configures New.
type Options struct {
	Env runenv.Env
	// Vendor is stamped on events that do not name one.
	Vendor string
	// Stdout receives the log-tail lines; nil is os.Stdout.
	Stdout io.Writer
	// StartSequence continues a run whose earlier events were stamped by
	// another process.
	StartSequence uint64
	// MaxInFlight overrides PublishMaxInFlight (1 is strict order).
	MaxInFlight int
	// PublishBuffer overrides PublishBuffer (benchmarks size it to hold
	// every event, to measure sustained throughput without drops).
	PublishBuffer int
	// TerminationLog is the file Close writes the run's delivery summary
	// to (the container's terminationMessagePath); empty writes none.
	TerminationLog string
	Logger         *slog.Logger
}

// Emitter is one process's view of the run's event stream.
type Emitter struct {
	run *events.Run
	set *sinks.Set
	pub *events.Publisher
	log *slog.Logger

	outMu sync.Mutex
	out   io.Writer
	buf   []byte

	termLog string
	// kinds counts the events delivered, by kind, for the summary.
	kindsMu sync.Mutex
	kinds   map[eventsv1.EventKind]uint64
}

// New builds the sinks from AGENT_SINKS/AGENT_SELECT and, when a NATS URL
// is configured, a publisher. Problems are logged (by name, never with a
// secret value) and what works is used: events matter, but never more
// than the run itself, so a broken sink or NATS setting does not stop it.
func New(opts Options) *Emitter {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	out := opts.Stdout
	if out == nil {
		out = os.Stdout
	}
	e := &Emitter{
		run: events.NewRun(opts.Env.Identity(), events.WithVendor(opts.Vendor),
			events.WithStartSequence(opts.StartSequence)),
		log:     log,
		out:     out,
		termLog: opts.TerminationLog,
		kinds:   map[eventsv1.EventKind]uint64{},
	}
	if opts.Env.NATSURL != "" {
		pub, err := newPublisher(opts, log)
		if err != nil {
			log.Error("no NATS publishing for this run", "err", err)
		} else {
			e.pub = pub
		}
	}
	cfgs, sel, err := sinks.FromEnv(opts.Env.Getenv)
	if err != nil {
		log.Warn("output sinks or select partly unusable", "err", err)
	}
	// stdout is written here directly (it must never drop a line) and NATS
	// is published to directly (unfiltered), so neither goes through the
	// Set, whose queues drop when full.
	var kept []sinks.Config
	for _, c := range cfgs {
		switch c.Type {
		case sinks.TypeStdout:
		case sinks.TypeNATS:
			if c.Subject != "" {
				// A recipe's own nats sink: its selected events go, on
				// the run's connection, under the namespace's prefix.
				kept = append(kept, c)
				continue
			}
			if e.pub == nil {
				log.Warn("output.sinks names nats but no NATS_URL is set; skipping it")
			}
		default:
			kept = append(kept, c)
		}
	}
	bo := sinks.BuildOptions{Getenv: opts.Env.Getenv, Select: sel, QueueSize: SinkQueue, Logger: log, Namespace: opts.Env.Namespace}
	if e.pub != nil {
		bo.NATSConn = e.pub.Conn()
	}
	e.set, err = sinks.Build(kept, bo)
	if err != nil {
		log.Warn("some output sinks could not be built", "err", err)
	}
	return e
}

// newPublisher connects the run's publisher. With the run's own
// credential (AGENT_NATS_CREDS, from the run's Secret) it authenticates
// as the run, takes replies on the run's own inbox (the only one the
// credential may read), keys its message ids with the credential so no
// other client can predict them, and leaves the stream alone, which the
// credential may not manage. A CA (AGENT_NATS_CA_FILE) makes the
// connection verify the server over TLS, with or without a credential.
// An unusable credential is an error naming the variable, never quoting
// it.
func newPublisher(opts Options, log *slog.Logger) (*events.Publisher, error) {
	env := opts.Env
	po := events.PublisherOptions{
		URL: env.NATSURL, Name: "supervisor " + env.Namespace + "/" + env.Agent,
		Buffer: opts.PublishBuffer, MaxInFlight: opts.MaxInFlight, Logger: log,
	}
	if po.MaxInFlight <= 0 {
		po.MaxInFlight = PublishMaxInFlight
	}
	if po.Buffer <= 0 {
		po.Buffer = PublishBuffer
	}
	client := natsauth.Client{Creds: []byte(env.NATSCreds), CAFile: env.NATSCAFile}
	if env.NATSCreds != "" {
		key, err := client.MsgIDKey()
		if err != nil {
			return nil, fmt.Errorf("the run's NATS credential %s: %w", runspec.EnvNATSCreds, err)
		}
		client.InboxPrefix = natsauth.InboxPrefix(env.UID)
		po.MsgIDKey, po.NoStreamSetup = key, true
	}
	po.ConnectOptions = client.Options()
	return events.NewPublisher(po)
}

// Run returns the stamper, for callers that build events themselves.
func (e *Emitter) Run() *events.Run { return e.run }

// Lifecycle stamps and emits a lifecycle event.
func (e *Emitter) Lifecycle(phase, status, reason string, exitCode *int32, tool string) {
	e.Event(&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_Lifecycle{Lifecycle: &eventsv1.Lifecycle{
		Phase: phase, Status: status, Reason: reason, ExitCode: exitCode, Tool: tool}}})
}

// Event stamps ev and emits it everywhere: its event object to stdout
// (CLI lines are echoed verbatim by the caller instead), then the sinks
// and NATS.
func (e *Emitter) Event(ev *eventsv1.RunEvent) {
	e.run.Stamp(ev)
	e.outMu.Lock()
	line, err := sinks.Line(ev)
	if err == nil {
		e.buf = append(append(e.buf[:0], line...), '\n')
		_, err = e.out.Write(e.buf)
	}
	e.outMu.Unlock()
	if err != nil {
		e.log.Warn("writing event to stdout", "err", err)
	}
	e.Deliver(ev)
}

// Deliver passes an already stamped event to the sinks and NATS without
// echoing it; it never blocks.
//
//nolint:contextcheck // Set.Deliver only queues and ignores its ctx (the Sink signature has one), so callers have no context to pass
func (e *Emitter) Deliver(ev *eventsv1.RunEvent) {
	e.count(ev)
	_ = e.set.Deliver(context.Background(), ev) // drops are counted by the Set
	if e.pub != nil {
		e.pub.Publish(ev)
	}
}

// DeliverLine passes the already stamped events of one CLI line to the
// sinks (which get the line once) and NATS (each event) without echoing
// them; it never blocks.
func (e *Emitter) DeliverLine(line []byte, evs []*eventsv1.RunEvent) {
	e.count(evs...)
	_ = e.set.DeliverLine(line, evs) // drops and refusals are counted and logged by the Set
	if e.pub != nil {
		for _, ev := range evs {
			e.pub.Publish(ev)
		}
	}
}

// count adds evs to the summary's counts by kind.
func (e *Emitter) count(evs ...*eventsv1.RunEvent) {
	e.kindsMu.Lock()
	defer e.kindsMu.Unlock()
	for _, ev := range evs {
		e.kinds[ev.GetKind()]++
	}
}

// WriteLine writes a CLI line (newline included) to stdout, serialised
// with the events Event echoes so lines never interleave.
func (e *Emitter) WriteLine(b []byte) error {
	e.outMu.Lock()
	defer e.outMu.Unlock()
	_, err := e.out.Write(b)
	return err
}

// Close flushes the sinks and the publisher, each bounded by timeout,
// writes the delivery summary to the termination log, and records the
// last sequence in seqFile when it is not empty.
func (e *Emitter) Close(timeout time.Duration, seqFile string) error {
	return e.CloseWithin(timeout, timeout, seqFile)
}

// CloseWithin is Close with the NATS flush bounded apart from the sinks'.
// The stream is the run's durable record and the publisher's buffer holds
// what an outage kept back, so the run may wait longer for NATS to return
// than for a receiver that is down.
func (e *Emitter) CloseWithin(sinks, nats time.Duration, seqFile string) error {
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), sinks)
	defer cancel()
	if err := e.set.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	var sum runspec.Summary
	if e.pub != nil {
		nctx, ncancel := context.WithTimeout(context.Background(), nats)
		defer ncancel()
		if err := e.pub.Close(nctx); err != nil {
			errs = append(errs, err)
		}
		st := e.pub.Stats()
		if st.Dropped > 0 || st.Reordered > 0 {
			e.log.Warn("nats publishing lost or reordered events", "dropped", st.Dropped, "reordered", st.Reordered)
		}
		sum.NATSDropped = st.Dropped
	}
	for _, st := range e.set.Stats() {
		if st.Dropped > 0 || st.Failed > 0 {
			e.log.Warn("sink did not deliver every event", "sink", st.Name, "failed", st.Failed, "dropped", st.Dropped)
		}
		sum.SinkFailed += st.Failed
		sum.SinkDropped += st.Dropped
	}
	// Both are closed: the counts are final.
	e.writeSummary(sum)
	if seqFile != "" {
		if err := WriteSequence(seqFile, e.run.LastSequence()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Summary returns the delivery summary so far, without the sinks' and
// the publisher's losses, which Close adds once they are final.
func (e *Emitter) Summary() runspec.Summary {
	e.kindsMu.Lock()
	defer e.kindsMu.Unlock()
	var s runspec.Summary
	for k, n := range e.kinds {
		if s.Events == nil {
			s.Events = map[string]uint64{}
		}
		s.Events[k.SubjectToken()] += n
	}
	return s
}

// writeSummary writes the run's delivery summary to the termination log,
// where the kubelet finds it for the container's status: a run pod ends
// before anything scrapes it, so the agent-controller counts these figures
// when it reads the finished pod (docs/supervisor.md). The file is the
// container runtime's: it is written only when it exists, so a supervisor
// run by hand leaves nothing behind, and a failure costs the run nothing.
func (e *Emitter) writeSummary(losses runspec.Summary) {
	if e.termLog == "" {
		return
	}
	s := e.Summary()
	s.NATSDropped, s.SinkFailed, s.SinkDropped = losses.NATSDropped, losses.SinkFailed, losses.SinkDropped
	raw, err := s.Encode()
	if err != nil {
		e.log.Debug("run summary not written", "path", e.termLog, "err", err)
		return
	}
	f, err := os.OpenFile(e.termLog, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		e.log.Debug("run summary not written", "path", e.termLog, "err", err)
		return
	}
	_, err = f.Write(raw)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		e.log.Debug("run summary not written", "path", e.termLog, "err", err)
	}
}

// PublisherStats returns the NATS publisher's counters (zero without NATS).
func (e *Emitter) PublisherStats() events.Stats {
	if e.pub == nil {
		return events.Stats{}
	}
	return e.pub.Stats()
}

// WriteSequence records the last stamped sequence.
func WriteSequence(path string, seq uint64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("record event sequence: %w", err)
	}
	if err := os.WriteFile(path, []byte(strconv.FormatUint(seq, 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("record event sequence: %w", err)
	}
	return nil
}

// ReadSequence returns the sequence recorded by WriteSequence, 0 when there
// is none (a run without an init container, e.g. by hand).
func ReadSequence(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// WriteStarted records t as the run's start.
func WriteStarted(path string, t time.Time) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("record start time: %w", err)
	}
	if err := os.WriteFile(path, []byte(strconv.FormatInt(t.UnixMilli(), 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("record start time: %w", err)
	}
	return nil
}

// ReadStarted returns the time WriteStarted recorded, if any.
func ReadStarted(path string) (time.Time, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}
