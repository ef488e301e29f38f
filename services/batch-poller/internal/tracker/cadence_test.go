package tracker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tools/fakevendor"

	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

func TestGetNeverReadsTheVendorMoreThanOncePerPeriod(t *testing.T) {
	const p = 200 * time.Millisecond
	h := newHarness(t, fakevendor.Options{Outcome: fakevendor.OutcomeNever}, p)
	start := time.Now()
	var refs []Ref
	for i, pv := range providers {
		refs = append(refs, h.submit(t, pv, fmt.Sprintf("uid-%d", i), "hello", ""))
	}
	// 1,000 Gets per batch from 8 goroutines over about three periods.
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 125 {
				for _, ref := range refs {
					s, err := h.tr.Get(context.Background(), ref)
					if err != nil || s.State != batchv1.State_STATE_PENDING {
						t.Errorf("worker %d get %d: %+v %v", w, i, s, err)
						return
					}
				}
				time.Sleep(3 * p / 125)
			}
		})
	}
	wg.Wait()
	time.Sleep(p) // let the scheduler run on its own for a period too
	h.halt()
	for _, ref := range refs {
		calls := h.statusCalls(ref)
		elapsed := time.Since(start)
		// Reads start at least a period apart, the first after start.
		limit := int(elapsed/p) + 1
		if calls > limit || calls < 2 {
			t.Errorf("%v %s: %d vendor reads in %v, want between 2 and %d", ref.Provider, ref.BatchID, calls, elapsed, limit)
		}
	}
}

func TestNoticeIsPublishedOnceWhenABatchEnds(t *testing.T) {
	for _, pv := range providers {
		t.Run(pv.name+": one notice naming the run and batch", func(t *testing.T) {
			h := newHarness(t, fakevendor.Options{PollsUntilEnded: 2}, period)
			ref := h.submit(t, pv, "uid-n", "hello", "")
			if s, err := h.tr.Get(context.Background(), ref); err != nil || s.State != batchv1.State_STATE_PENDING {
				t.Fatalf("first get = %+v %v, want PENDING", s, err)
			}
			h.waitEnd(t, ref)
			// More Gets, a cancel and a few periods must not repeat it.
			for range 5 {
				_, _ = h.tr.Get(context.Background(), ref)
			}
			_, _ = h.tr.Cancel(context.Background(), ref)
			time.Sleep(3 * period)
			got := h.noticeList()
			if len(got) != 1 {
				t.Fatalf("%d notices, want 1: %v", len(got), got)
			}
			n := got[0]
			b := n.GetBatch()
			if n.GetKind() != eventsv1.EventKind_EVENT_KIND_BATCH || n.GetRun().GetUid() != "uid-n" ||
				n.GetRun().GetNamespace() != testNS || n.GetRun().GetAgent() != "agent-uid-n" ||
				b.GetProvider() != pv.name || b.GetBatchId() != ref.BatchID || b.GetStatus() != "succeeded" {
				t.Errorf("notice = %v", n)
			}
		})
	}
}

func TestRestartedTrackerPicksUpAnUnknownBatchOnGet(t *testing.T) {
	for _, pv := range providers {
		t.Run(pv.name+": get of an untracked batch tracks and answers it", func(t *testing.T) {
			h := newHarness(t, fakevendor.Options{PollsUntilEnded: 3}, period)
			ref := h.submit(t, pv, "uid-r", "after restart", "")
			h.halt()
			h.start(t, staticKeys(testKey), nil)
			if h.tr.Tracked(ref.Provider, ref.BatchID) {
				t.Fatal("a fresh tracker already knows the batch")
			}
			s := h.waitEnd(t, ref)
			if !h.tr.Tracked(ref.Provider, ref.BatchID) || s.State != batchv1.State_STATE_SUCCEEDED {
				t.Fatalf("state %v, tracked %v", s.State, h.tr.Tracked(ref.Provider, ref.BatchID))
			}
			if res := readLines(t, pv.model, s.Lines); res.Text != fakevendor.Answer("after restart") {
				t.Errorf("result = %+v", res)
			}
		})
	}
}

func TestSubmitIsIdempotentPerRunUID(t *testing.T) {
	h := newHarness(t, fakevendor.Options{Outcome: fakevendor.OutcomeNever}, period)
	run := runFor("uid-same")
	ids := make([]string, 10)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			id, _, err := h.tr.Submit(context.Background(), Submission{Run: run, Model: "claude-opus-5-5", Prompt: "p", MaxTokens: 10})
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("ids differ: %v", ids)
		}
	}
	if n := h.fv.Calls("POST /v1/messages/batches"); n != 1 {
		t.Errorf("%d batches created, want 1", n)
	}
}

func TestVendorErrors(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"a wrong API key surfaces the vendor's 401 on submit", func(t *testing.T, h *harness) {
			h.halt()
			h.start(t, staticKeys("sk-wrong"), nil)
			for _, pv := range providers {
				_, _, err := h.tr.Submit(context.Background(), Submission{Run: runFor("u"), Model: pv.model, Prompt: "p", MaxTokens: 5})
				var ve *vendor.Error
				if !errors.As(err, &ve) || ve.HTTPStatus != 401 {
					t.Errorf("%s: err = %v, want a vendor 401", pv.name, err)
				}
			}
		}},
		{"a model whose vendor has no batch API is refused", func(t *testing.T, h *harness) {
			for _, model := range []string{"exec", "opencode/google/gemini-2.5-pro"} {
				_, _, err := h.tr.Submit(context.Background(), Submission{Run: runFor("u"), Model: model, Prompt: "p", MaxTokens: 5})
				if !errors.Is(err, ErrNoBatchAPI) {
					t.Errorf("%s: err = %v", model, err)
				}
			}
		}},
		{"a missing key fails before any vendor call", func(t *testing.T, h *harness) {
			_, _, err := h.tr.Submit(context.Background(), Submission{Run: Run{Namespace: "other", Agent: "a", UID: "u"}, Model: "gpt-5", Prompt: "p", MaxTokens: 5})
			if err == nil || len(h.fv.AllCalls()) != 0 {
				t.Errorf("err = %v, calls = %v", err, h.fv.AllCalls())
			}
		}},
		{"a vendor outage keeps the last known state and counts the failed polls", func(t *testing.T, h *harness) {
			ref := h.submit(t, providers[0], "u-out", "p", "")
			if s, err := h.tr.Get(context.Background(), ref); err != nil || s.State != batchv1.State_STATE_PENDING {
				t.Fatalf("get = %+v %v", s, err)
			}
			_ = h.fv.Close()
			time.Sleep(3 * period)
			s, err := h.tr.Get(context.Background(), ref)
			if err != nil || s.State != batchv1.State_STATE_PENDING || !h.tr.Tracked(ref.Provider, ref.BatchID) {
				t.Errorf("get during outage = %+v %v", s, err)
			}
			if v := counterValue(t, h, "anthropic", "poll", "error"); v < 1 {
				t.Errorf("failed polls counted %v", v)
			}
		}},
		{"a batch never read before an outage is unavailable, not pending", func(t *testing.T, h *harness) {
			_ = h.fv.Close()
			ref := Ref{Run: runFor("u-new"), Provider: batchv1.Provider_PROVIDER_OPENAI, BatchID: "batch_unknown", Model: "gpt-5"}
			_, err := h.tr.Get(context.Background(), ref)
			if !errors.Is(err, ErrNoState) {
				t.Errorf("err = %v, want ErrNoState", err)
			}
		}},
		{"a batch the vendor does not know is not found and untracked", func(t *testing.T, h *harness) {
			ref := Ref{Run: runFor("u-404"), Provider: batchv1.Provider_PROVIDER_ANTHROPIC, BatchID: "msgbatch_nope"}
			_, err := h.tr.Get(context.Background(), ref)
			if !errors.Is(err, ErrGone) || h.tr.Tracked(ref.Provider, ref.BatchID) {
				t.Errorf("err = %v, tracked %v", err, h.tr.Tracked(ref.Provider, ref.BatchID))
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newHarness(t, fakevendor.Options{Outcome: fakevendor.OutcomeNever}, period))
		})
	}
}
