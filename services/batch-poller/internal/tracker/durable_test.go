package tracker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tools/fakevendor"

	"github.com/agentplane/agentplane/services/batch-poller/internal/keys"
	"github.com/agentplane/agentplane/services/batch-poller/internal/metrics"
	"github.com/agentplane/agentplane/services/batch-poller/internal/state"
	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

// replica is a second tracker over h's vendor and store, as another
// batch-poller replica (or the next process) is.
func (h *harness) replica(t *testing.T, publish func(*eventsv1.RunEvent) error) (*Tracker, *metrics.Metrics) {
	t.Helper()
	m := metrics.New()
	tr := New(adapters(h.base), staticKeys(testKey), Options{Period: h.period, Concurrency: 8, Publish: publish,
		DefaultKeyName: keys.DefaultKeyName, Metrics: m, Store: h.store, Identity: "poller-other"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tr.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return tr, m
}

// vendorBatches is how many batches the vendor holds for p: each is one
// vendor submit.
func (h *harness) vendorBatches(p provider) int { return len(h.fv.Live()[p.name]) }

// failingStore refuses every call, as a store whose NATS is away does.
type failingStore struct{}

var errStoreDown = errors.New("nats: no servers available for connection")

func (failingStore) Get(context.Context, string) (state.Record, uint64, error) {
	return state.Record{}, 0, errStoreDown
}
func (failingStore) Create(context.Context, string, state.Record) (uint64, error) {
	return 0, errStoreDown
}
func (failingStore) Update(context.Context, string, state.Record, uint64) (uint64, error) {
	return 0, errStoreDown
}
func (failingStore) Delete(context.Context, string, uint64) error { return errStoreDown }

func TestSubmitIsOncePerRunAcrossProcessesAndReplicas(t *testing.T) {
	const period = 50 * time.Millisecond
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			cases := []struct {
				name string
				run  func(t *testing.T, h *harness)
			}{
				{"a submit retried after a restart returns the recorded batch without a vendor submit", func(t *testing.T, h *harness) {
					first := h.submit(t, p, "u1", "hello", "")
					h.halt()
					h.start(t, staticKeys(testKey), nil)
					again := h.submit(t, p, "u1", "hello", "")
					if again.BatchID != first.BatchID || h.vendorBatches(p) != 1 {
						t.Fatalf("after restart: batch %s (first %s), vendor holds %d", again.BatchID, first.BatchID, h.vendorBatches(p))
					}
					if got := testutil.ToFloat64(h.m.SubmitsRecorded.WithLabelValues("existing")); got != 1 {
						t.Fatalf("submits answered from the table = %v, want 1", got)
					}
				}},
				{"a submit sent to another replica returns the first replica's batch", func(t *testing.T, h *harness) {
					first := h.submit(t, p, "u1", "hello", "")
					other, _ := h.replica(t, nil)
					id, _, err := other.Submit(t.Context(), Submission{Run: runFor("u1"), Model: p.model, Prompt: "hello", MaxTokens: 256})
					if err != nil || id != first.BatchID || h.vendorBatches(p) != 1 {
						t.Fatalf("other replica: %q %v, want %q; vendor holds %d", id, err, first.BatchID, h.vendorBatches(p))
					}
				}},
				{"a run whose submit is claimed elsewhere is in progress, and nothing is sent", func(t *testing.T, h *harness) {
					claimRun(t, h.store, "u1", time.Now())
					_, _, err := h.tr.Submit(t.Context(), Submission{Run: runFor("u1"), Model: p.model, Prompt: "hello", MaxTokens: 256})
					if !errors.Is(err, ErrSubmitInProgress) || h.vendorBatches(p) != 0 {
						t.Fatalf("Submit = %v with %d vendor batches, want ErrSubmitInProgress and none", err, h.vendorBatches(p))
					}
				}},
				{"a claim older than the submit bound is taken over and submitted once", func(t *testing.T, h *harness) {
					claimRun(t, h.store, "u1", time.Now().Add(-time.Hour))
					h.submit(t, p, "u1", "hello", "")
					if h.vendorBatches(p) != 1 || testutil.ToFloat64(h.m.SubmitTakeovers) != 1 {
						t.Fatalf("vendor holds %d, takeovers %v; want 1 and 1", h.vendorBatches(p), testutil.ToFloat64(h.m.SubmitTakeovers))
					}
				}},
				{"a submit the vendor refused releases the claim, so the retry submits", func(t *testing.T, h *harness) {
					h.halt()
					k := staticKeys("sk-wrong")
					h.start(t, k, nil)
					if _, _, err := h.tr.Submit(t.Context(), Submission{Run: runFor("u1"), Model: p.model, Prompt: "hello", MaxTokens: 256}); err == nil {
						t.Fatal("a submit with a refused key succeeded")
					}
					if _, _, err := h.store.Get(t.Context(), state.Key(testNS, "u1")); !errors.Is(err, state.ErrNotFound) {
						t.Fatalf("claim after a refused submit: %v, want released", err)
					}
					k[testNS][keys.DefaultKeyName(p.id)] = testKey
					h.submit(t, p, "u1", "hello", "")
				}},
				{"concurrent submits to two replicas make one vendor batch", func(t *testing.T, h *harness) {
					other, _ := h.replica(t, nil)
					ids := make([]string, 8)
					var wg sync.WaitGroup
					for i := range ids {
						tr := h.tr
						if i%2 == 1 {
							tr = other
						}
						wg.Go(func() {
							deadline := time.Now().Add(10 * time.Second)
							for time.Now().Before(deadline) {
								id, _, err := tr.Submit(t.Context(), Submission{Run: runFor("u1"), Model: p.model, Prompt: "hello", MaxTokens: 256})
								if err == nil {
									ids[i] = id
									return
								}
								if !errors.Is(err, ErrSubmitInProgress) {
									t.Errorf("Submit: %v", err)
									return
								}
								time.Sleep(10 * time.Millisecond)
							}
						})
					}
					wg.Wait()
					for _, id := range ids {
						if id != ids[0] || id == "" {
							t.Fatalf("replicas answered %v, want one batch", ids)
						}
					}
					if h.vendorBatches(p) != 1 {
						t.Fatalf("vendor holds %d batches, want 1", h.vendorBatches(p))
					}
				}},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					h := newHarness(t, fakevendor.Options{Outcome: fakevendor.OutcomeNever}, period)
					h.store = state.NewMemory()
					h.halt()
					h.start(t, staticKeys(testKey), nil)
					c.run(t, h)
				})
			}
		})
	}
}

// claimRun writes a submit claim of another process for the run of uid.
func claimRun(t *testing.T, s state.Store, uid string, since time.Time) {
	t.Helper()
	r := runFor(uid)
	if _, err := s.Create(t.Context(), state.Key(r.Namespace, r.UID), state.Record{Namespace: r.Namespace, Agent: r.Agent, UID: r.UID,
		SubmittingBy: "poller-gone", SubmittingSince: since}); err != nil {
		t.Fatal(err)
	}
}

func TestSubmitWithoutTheStoreSendsNothing(t *testing.T) {
	h := newHarness(t, fakevendor.Options{}, 50*time.Millisecond)
	h.store = failingStore{}
	h.halt()
	h.start(t, staticKeys(testKey), nil)
	p := providers[0]
	_, _, err := h.tr.Submit(t.Context(), Submission{Run: runFor("u1"), Model: p.model, Prompt: "hello", MaxTokens: 256})
	if !errors.Is(err, ErrStateUnavailable) || !errors.Is(err, errStoreDown) {
		t.Fatalf("Submit = %v, want ErrStateUnavailable with the store's reason", err)
	}
	if h.vendorBatches(p) != 0 {
		t.Fatalf("vendor holds %d batches, want none", h.vendorBatches(p))
	}
}

func TestSubmitThatNeverReachedTheVendorReleasesTheClaim(t *testing.T) {
	store := state.NewMemory()
	// A port nothing listens on: the dial fails, so the vendor holds
	// nothing and the retry may submit.
	down := adapters("http://127.0.0.1:1")
	tr := New(down, staticKeys(testKey), Options{Period: time.Second, Store: store, DefaultKeyName: keys.DefaultKeyName})
	_, _, err := tr.Submit(t.Context(), Submission{Run: runFor("u1"), Model: providers[0].model, Prompt: "hello", MaxTokens: 256})
	if err == nil {
		t.Fatal("submit to a closed port succeeded")
	}
	if store.Len() != 0 {
		t.Fatalf("claim kept after a dial error: %d records", store.Len())
	}
}

func TestOneNoticePerBatchAcrossReplicasAndRestarts(t *testing.T) {
	const period = 50 * time.Millisecond
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			h := newHarness(t, fakevendor.Options{PollsUntilEnded: 2}, period)
			h.store = state.NewMemory()
			var published atomic.Int32
			count := func(*eventsv1.RunEvent) error { published.Add(1); return nil }
			h.halt()
			h.start(t, staticKeys(testKey), count)
			ref := h.submit(t, p, "u1", "hello", "")
			other, _ := h.replica(t, count)
			// Both replicas follow the batch to its end.
			if _, err := other.Get(t.Context(), ref); err != nil {
				t.Fatal(err)
			}
			h.waitEnd(t, ref)
			waitFor(t, func() bool {
				s, err := other.Get(t.Context(), ref)
				return err == nil && s.State != batchv1.State_STATE_PENDING
			})
			// A process started after the end reads it again.
			h.halt()
			h.start(t, staticKeys(testKey), count)
			h.waitEnd(t, ref)
			if got := published.Load(); got != 1 {
				t.Fatalf("%d notices published, want 1", got)
			}
			if rec, _, _ := h.store.Get(t.Context(), state.Key(testNS, "u1")); !rec.Notified {
				t.Fatalf("record %+v not marked notified", rec)
			}
		})
	}
}

func TestARecordedBatchIsTheRunsWithoutAskingTheVendor(t *testing.T) {
	h := newHarness(t, fakevendor.Options{Outcome: fakevendor.OutcomeNever}, 50*time.Millisecond)
	h.store = state.NewMemory()
	h.halt()
	h.start(t, staticKeys(testKey), nil)
	p := providers[0] // Anthropic: a pending batch shows no request id.
	ref := h.submit(t, p, "u1", "hello", "")
	other, _ := h.replica(t, nil)
	if _, err := other.Get(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	other.mu.Lock()
	e := other.entries[runKey(ref.Run)]
	other.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.owned {
		t.Fatal("the other replica does not trust the recorded batch as the run's")
	}
}

func TestDeleteForgetsTheRecord(t *testing.T) {
	h := newHarness(t, fakevendor.Options{}, 50*time.Millisecond)
	h.store = state.NewMemory()
	h.halt()
	h.start(t, staticKeys(testKey), nil)
	ref := h.submit(t, providers[1], "u1", "hello", "")
	h.waitEnd(t, ref)
	if err := h.tr.Delete(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.store.Get(t.Context(), state.Key(testNS, "u1")); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("record after Delete: %v, want none", err)
	}
}

func TestBackoffDoublesThePeriodUpToTheCap(t *testing.T) {
	cases := []struct {
		name     string
		period   time.Duration
		max      time.Duration
		failures int
		want     time.Duration
	}{
		{"a batch read without failure waits one period", time.Second, 10 * time.Second, 0, time.Second},
		{"each failure doubles the wait", time.Second, 10 * time.Second, 3, 8 * time.Second},
		{"the wait stops at the cap", time.Second, 10 * time.Second, 4, 10 * time.Second},
		{"many failures stay at the cap", time.Second, 10 * time.Second, 1000, 10 * time.Second},
		{"a cap below the period is the period", time.Minute, time.Second, 5, time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := New(nil, nil, Options{Period: c.period, MaxBackoff: c.max})
			if got := tr.backoff(c.failures); got != c.want {
				t.Fatalf("backoff(%d) = %s, want %s", c.failures, got, c.want)
			}
		})
	}
}

func TestFailedPollsBackOffAndASuccessResets(t *testing.T) {
	const period = 20 * time.Millisecond
	h := newHarness(t, fakevendor.Options{Outcome: fakevendor.OutcomeNever}, period)
	ref := h.submit(t, providers[0], "u1", "hello", "")
	h.halt()
	// The key is refused from now on: every poll fails.
	k := staticKeys("sk-wrong")
	h.start(t, k, nil)
	if _, err := h.tr.Get(t.Context(), ref); err == nil {
		t.Fatal("a poll with a refused key succeeded")
	}
	time.Sleep(40 * period)
	calls := h.statusCalls(ref)
	// At the full rate 40 periods make about 40 reads; backing off
	// (1, 2, 4, 8, 16 periods) makes about 5.
	if calls > 12 {
		t.Fatalf("%d vendor reads in 40 periods of failing polls: no backoff", calls)
	}
	if testutil.ToFloat64(h.m.PollBackoffs) == 0 {
		t.Fatal("no backoff counted")
	}
	k[testNS][keys.DefaultKeyName(providers[0].id)] = testKey
	waitFor(t, func() bool {
		h.tr.mu.Lock()
		e := h.tr.entries[runKey(ref.Run)]
		h.tr.mu.Unlock()
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.failures == 0 && e.known
	})
}

// waitFor polls ok for up to 15 s.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 15 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var _ vendor.Adapter = (*vendor.Anthropic)(nil)
