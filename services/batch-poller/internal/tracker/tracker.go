package tracker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"

	"github.com/agentplane/agentplane/services/batch-poller/internal/metrics"
	"github.com/agentplane/agentplane/services/batch-poller/internal/state"
	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

// Keys resolves the API key of a run: namespace's agent-secrets, key
// keyName. Errors are meant for the caller as they are (they name the
// Secret and key, never the value). ctx bounds any API read it makes.
type Keys interface {
	Key(ctx context.Context, namespace, keyName string) (string, error)
}

// Options tune a Tracker.
type Options struct {
	// Period is the poll period: no batch is read at the vendor more often.
	Period time.Duration
	// Concurrency bounds the scheduler's simultaneous vendor polls.
	Concurrency int
	// CallTimeout bounds one vendor poll.
	CallTimeout time.Duration
	// Publish sends a completion notice; nil sends none.
	Publish func(*eventsv1.RunEvent) error
	// DefaultKeyName is the agent-secrets key used when a run names none.
	DefaultKeyName func(batchv1.Provider) string
	// Metrics receives the counters; nil makes a private set.
	Metrics *metrics.Metrics
	// Log receives poll failures and submits; nil discards.
	Log *slog.Logger
	// Store is the durable table of each run's batch (package state),
	// shared by the replicas; nil keeps it in this process only.
	Store state.Store
	// Identity names this replica in submit claims (the pod's name).
	Identity string
	// SubmitBound is how long a submit claim is honoured: past it, the
	// process that claimed it can no longer be waiting for the vendor and
	// another call takes it over. Default twice CallTimeout.
	SubmitBound time.Duration
	// MaxBackoff caps the wait between polls of a batch whose polls fail:
	// each failure doubles the period up to it. Default 10 minutes, never
	// less than the period.
	MaxBackoff time.Duration
}

// Tracker is the table of batches batch-poller knows about.
type Tracker struct {
	adapters    map[batchv1.Provider]vendor.Adapter
	keys        Keys
	period      time.Duration
	concurrency int
	callTimeout time.Duration
	publish     func(*eventsv1.RunEvent) error
	keyName     func(batchv1.Provider) string
	m           *metrics.Metrics
	log         *slog.Logger
	now         func() time.Time
	epoch       time.Time
	store       state.Store
	identity    string
	submitBound time.Duration
	maxBackoff  time.Duration

	mu sync.Mutex
	// entries are the tracked batches by run (runKey: namespace and uid),
	// one per run; batches indexes the same entries by batch (batchKey),
	// so that no batch is tracked for two runs.
	entries map[string]*entry
	batches map[string]*entry
	queue   pollHeap
	live    int // tracked batches that have not ended
	wake    chan struct{}
	submits singleflight.Group
}

// entry is one tracked batch. Lock order: Tracker.mu before entry.mu.
type entry struct {
	key      string // runKey
	bkey     string // batchKey
	ref      Ref
	vref     vendor.Ref
	phase    time.Duration
	index    int // in the poll heap, -1 when not queued
	nextPoll time.Time
	// poll shares one vendor read among the callers that ask while it
	// runs. It is the entry's own, not keyed by batch in the Tracker, so
	// a batch tracked anew never waits on a read of its forgotten entry.
	poll singleflight.Group

	mu        sync.Mutex
	snap      Snapshot
	known     bool  // snap came from the vendor
	lastErr   error // of the last poll, when it failed
	lastStart time.Time
	// failures counts the polls that failed in a row; the next poll waits
	// for backoff(failures).
	failures int
	// recordChecked: the durable table was asked whether the batch is
	// the run's (recordOwns).
	recordChecked bool
	ended         bool
	gone          bool
	// owned: the batch was submitted here for this run, or the vendor
	// showed it is this run's (see owner.go).
	owned bool
}

// New returns a Tracker over one adapter per provider. Call Run to start
// the background polls.
func New(adapters []vendor.Adapter, keys Keys, opts Options) *Tracker {
	if opts.Concurrency < 1 {
		opts.Concurrency = 16
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 30 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New()
	}
	if opts.Store == nil {
		opts.Store = state.NewMemory()
	}
	if opts.SubmitBound <= 0 {
		opts.SubmitBound = 2 * opts.CallTimeout
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Minute
	}
	t := &Tracker{
		adapters: map[batchv1.Provider]vendor.Adapter{}, keys: keys, period: opts.Period,
		concurrency: opts.Concurrency, callTimeout: opts.CallTimeout, publish: opts.Publish,
		keyName: opts.DefaultKeyName, m: opts.Metrics, log: opts.Log, now: time.Now,
		store: opts.Store, identity: opts.Identity, submitBound: opts.SubmitBound, maxBackoff: max(opts.MaxBackoff, opts.Period),
		entries: map[string]*entry{}, batches: map[string]*entry{}, wake: make(chan struct{}, 1),
	}
	t.epoch = t.now()
	for _, a := range adapters {
		t.adapters[a.Provider()] = instrument(a, opts.Metrics)
	}
	return t
}

// batchKey names a batch: provider and vendor id.
func batchKey(p batchv1.Provider, id string) string { return vendor.ProviderName(p) + "/" + id }

// runKey names a run: its namespace and uid (the Agent name is not part
// of it, the apiserver's uid already tells runs apart).
func runKey(r Run) string { return r.Namespace + "/" + r.UID }

// apiKey resolves the run's key for provider p.
func (t *Tracker) apiKey(ctx context.Context, run Run, p batchv1.Provider) (string, error) {
	name := run.APIKeyKey
	if name == "" && t.keyName != nil {
		name = t.keyName(p)
	}
	return t.keys.Key(ctx, run.Namespace, name)
}

func (t *Tracker) adapter(p batchv1.Provider) (vendor.Adapter, error) {
	a, ok := t.adapters[p]
	if !ok {
		return nil, fmt.Errorf("provider %s is not served", p)
	}
	return a, nil
}

// InFlight is the number of tracked batches that have not ended.
func (t *Tracker) InFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live
}

// Tracked reports whether the tracker holds the batch.
func (t *Tracker) Tracked(p batchv1.Provider, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.batches[batchKey(p, id)]
	return ok
}

// track returns the entry of ref's run and batch, adding it (and queueing
// its first poll) when neither is tracked; owned says the batch was just
// submitted for the run. A run tracked with another batch, or a batch
// tracked for another run, is ErrNotThisRun: one run never reaches
// another's batch through the table.
func (t *Tracker) track(ref Ref, owned bool) (*entry, error) {
	rk, bk := runKey(ref.Run), batchKey(ref.Provider, ref.BatchID)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries[rk]; ok {
		if e.bkey != bk {
			return nil, notThisRun(ref)
		}
		return e, nil
	}
	if _, ok := t.batches[bk]; ok {
		return nil, notThisRun(ref)
	}
	cli := vendor.CLIFor(ref.Provider)
	if ref.Model != "" {
		cli = cliOf(ref.Model)
	}
	e := &entry{
		key: rk, bkey: bk, ref: ref, index: -1, phase: phaseOf(bk, t.period), owned: owned,
		vref: vendor.Ref{ID: ref.BatchID, CustomID: vendor.CustomID(ref.Run.Namespace, ref.Run.UID),
			LegacyCustomID: vendor.LegacyCustomID(ref.Run.UID), CLI: cli},
		snap: Snapshot{State: batchv1.State_STATE_PENDING},
	}
	t.entries[rk], t.batches[bk] = e, e
	t.schedule(e, time.Time{}, t.period)
	t.live++
	t.m.InFlight.Inc()
	return e, nil
}

// untrack forgets e.
func (t *Tracker) untrack(e *entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.entries[e.key] != e {
		return
	}
	delete(t.entries, e.key)
	if t.batches[e.bkey] == e {
		delete(t.batches, e.bkey)
	}
	t.unschedule(e)
	e.mu.Lock()
	if !e.ended {
		t.live--
		t.m.InFlight.Dec()
	}
	e.gone = true
	e.mu.Unlock()
}

// maybePoll reads e at the vendor unless it ended, was read less than a
// period ago (longer after failed reads: backoff), or is being read (then
// it waits for that read).
func (t *Tracker) maybePoll(ctx context.Context, e *entry) error {
	e.mu.Lock()
	ended := e.ended || e.gone
	e.mu.Unlock()
	if ended {
		return nil
	}
	// The read runs on its own goroutine, detached from the asking
	// caller: others may share it, and each may stop waiting when its
	// own context ends. Whether a read is due is decided inside, so a
	// caller arriving during a read waits for its answer.
	ch := e.poll.DoChan("", func() (any, error) {
		e.mu.Lock()
		now := t.now()
		if e.ended || e.gone || (!e.lastStart.IsZero() && now.Sub(e.lastStart) < t.backoff(e.failures)) {
			e.mu.Unlock()
			return nil, nil
		}
		e.lastStart = now
		e.mu.Unlock()
		return nil, t.pollVendor(context.WithoutCancel(ctx), e)
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pollVendor does one vendor read of e and records it, bounded by the
// call timeout; ctx is not cancelled with any one caller (see maybePoll).
func (t *Tracker) pollVendor(ctx context.Context, e *entry) error {
	ctx, cancel := context.WithTimeout(ctx, t.callTimeout)
	defer cancel()
	a, err := t.adapter(e.ref.Provider)
	if err != nil {
		return err
	}
	key, err := t.apiKey(ctx, e.ref.Run, e.ref.Provider)
	if err != nil {
		t.recordErr(e, err)
		return err
	}
	out, err := a.Poll(ctx, key, e.vref)
	if err != nil {
		if gone := t.forget(e, err); gone != nil {
			return gone
		}
		t.recordErr(e, err)
		t.log.Warn("batch poll failed; retrying next period", "provider", vendor.ProviderName(e.ref.Provider),
			"batch", e.ref.BatchID, "namespace", e.ref.Run.Namespace, "agent", e.ref.Run.Agent, "err", err)
		return err
	}
	t.record(ctx, e, out)
	return nil
}

func (t *Tracker) recordErr(e *entry, err error) {
	e.mu.Lock()
	e.lastErr = err
	e.failures++
	e.mu.Unlock()
	t.m.PollBackoffs.Inc()
}

// record stores an outcome; the first ended one publishes the notice.
func (t *Tracker) record(ctx context.Context, e *entry, out vendor.Outcome) {
	t.mu.Lock()
	e.mu.Lock()
	if e.ended {
		// A late read (e.g. a cancel racing a poll) must not overwrite the
		// result the notice announced.
		e.mu.Unlock()
		t.mu.Unlock()
		return
	}
	e.snap = Snapshot{State: out.State, Lines: out.Lines, FailureMessage: out.FailureMessage,
		VendorStatus: out.VendorStatus, CheckedAt: t.now()}
	e.known, e.lastErr, e.failures = true, nil, 0
	e.owned = e.owned || out.Owned
	justEnded := out.Ended() && !e.gone
	if justEnded {
		e.ended = true
		t.unschedule(e)
		t.live--
		t.m.InFlight.Dec()
	}
	e.mu.Unlock()
	t.mu.Unlock()
	if !justEnded {
		return
	}
	state := "failed"
	if out.State == batchv1.State_STATE_SUCCEEDED {
		state = "succeeded"
	}
	t.m.Finished.WithLabelValues(vendor.ProviderName(e.ref.Provider), state).Inc()
	// The notice carries the normalised state (events.v1 BatchEvent);
	// the vendor's own word stays in Get's vendor_status. One replica
	// publishes it, once (claimNotice).
	if t.claimNotice(ctx, e) {
		t.notify(e, state)
	}
}

// notify publishes the completion notice. It is fire and forget: the
// controller also polls, so a lost notice only delays it.
func (t *Tracker) notify(e *entry, status string) {
	if t.publish == nil {
		return
	}
	run := e.ref.Run
	ev := &eventsv1.RunEvent{
		Run:  &eventsv1.RunIdentity{Namespace: run.Namespace, Agent: run.Agent, Uid: run.UID},
		Kind: eventsv1.EventKind_EVENT_KIND_BATCH,
		Payload: &eventsv1.RunEvent_Batch{Batch: &eventsv1.BatchEvent{
			Provider: vendor.ProviderName(e.ref.Provider), BatchId: e.ref.BatchID, Status: status,
		}},
	}
	if err := t.publish(ev); err != nil {
		t.log.Warn("batch notice not published", "batch", e.ref.BatchID, "err", err)
		return
	}
	t.m.Notices.Inc()
}

// snapshot answers from the table: the last known state, or the reason
// there is none.
func (e *entry) snapshot() (Snapshot, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.known {
		return e.snap, nil
	}
	if e.lastErr != nil {
		return Snapshot{}, fmt.Errorf("%w: %w", ErrNoState, e.lastErr)
	}
	return Snapshot{}, ErrNoState
}
