package tracker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	"github.com/agentplane/agentplane/tools/fakevendor"
)

const period = 150 * time.Millisecond

func TestEachProviderBatchLifecycle(t *testing.T) {
	schema := `{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}`
	cases := []struct {
		name string
		opts fakevendor.Options
		// prompt and schema of the submitted run
		prompt, schema string
		// cancel right after submitting
		cancel    bool
		wantState batchv1.State
		// check looks at the ended snapshot
		check func(t *testing.T, p provider, s Snapshot)
	}{
		{
			name: "an answered batch succeeds with lines the vendor's parser reads back to the answer",
			opts: fakevendor.Options{PollsUntilEnded: 2}, prompt: "say hi", wantState: batchv1.State_STATE_SUCCEEDED,
			check: func(t *testing.T, p provider, s Snapshot) {
				res := readLines(t, p.model, s.Lines)
				if res.IsError || res.Text != fakevendor.Answer("say hi") {
					t.Errorf("result = %+v, want %q", res, fakevendor.Answer("say hi"))
				}
				if res.Usage.OutputTokens == 0 {
					t.Errorf("no usage in %+v", res)
				}
			},
		},
		{
			name: "output_schema reaches the vendor as its structured output option",
			opts: fakevendor.Options{}, prompt: "sum up", schema: schema, wantState: batchv1.State_STATE_SUCCEEDED,
			check: func(t *testing.T, p provider, s Snapshot) {
				// fakevendor answers in the schema's shape only when the
				// request carried the schema where the vendor reads it.
				var got map[string]string
				text := readLines(t, p.model, s.Lines).Text
				if err := json.Unmarshal([]byte(text), &got); err != nil || got["summary"] != fakevendor.Answer("sum up") {
					t.Errorf("structured answer = %q (%v)", text, err)
				}
			},
		},
		{
			name: "a failed request fails the run with the vendor's message",
			opts: fakevendor.Options{ErrorMessage: "quota gone for this org"}, prompt: "x FAKEVENDOR_FAIL", wantState: batchv1.State_STATE_FAILED,
			check: func(t *testing.T, p provider, s Snapshot) {
				if !strings.Contains(s.FailureMessage, "quota gone for this org") {
					t.Errorf("failure message = %q", s.FailureMessage)
				}
				if res := readLines(t, p.model, s.Lines); !res.IsError || !strings.Contains(res.Text, "quota gone") {
					t.Errorf("result line = %+v, want the error", res)
				}
			},
		},
		{
			name: "an expired batch fails saying so",
			opts: fakevendor.Options{Outcome: fakevendor.OutcomeExpire}, prompt: "late", wantState: batchv1.State_STATE_FAILED,
			check: func(t *testing.T, _ provider, s Snapshot) {
				if !strings.Contains(strings.ToLower(s.FailureMessage), "expire") {
					t.Errorf("failure message = %q", s.FailureMessage)
				}
			},
		},
		{
			name: "a failed batch fails with a message",
			opts: fakevendor.Options{Outcome: fakevendor.OutcomeFail}, prompt: "doomed", wantState: batchv1.State_STATE_FAILED,
			check: func(t *testing.T, _ provider, s Snapshot) {
				if !strings.Contains(s.FailureMessage, "fail") {
					t.Errorf("failure message = %q", s.FailureMessage)
				}
			},
		},
		{
			name: "a batch cancelled in flight fails as cancelled",
			opts: fakevendor.Options{Outcome: fakevendor.OutcomeNever}, prompt: "never", cancel: true, wantState: batchv1.State_STATE_FAILED,
			check: func(t *testing.T, _ provider, s Snapshot) {
				if !strings.Contains(strings.ToLower(s.FailureMessage), "cancel") {
					t.Errorf("failure message = %q", s.FailureMessage)
				}
			},
		},
	}
	for _, p := range providers {
		for _, tc := range cases {
			t.Run(p.name+": "+tc.name, func(t *testing.T) {
				h := newHarness(t, tc.opts, period)
				ref := h.submit(t, p, "uid-1", tc.prompt, tc.schema)
				if tc.cancel {
					s, err := h.tr.Cancel(context.Background(), ref)
					if err != nil {
						t.Fatalf("cancel: %v", err)
					}
					if s.State == batchv1.State_STATE_SUCCEEDED {
						t.Fatalf("cancel gave %v", s.State)
					}
				}
				s := h.waitEnd(t, ref)
				if s.State != tc.wantState {
					t.Fatalf("state = %v (%q), want %v", s.State, s.FailureMessage, tc.wantState)
				}
				if s.VendorStatus == "" || s.CheckedAt.IsZero() {
					t.Errorf("snapshot lacks vendor status or check time: %+v", s)
				}
				tc.check(t, p, s)
				if err := h.tr.Delete(context.Background(), ref); err != nil {
					t.Fatalf("delete: %v", err)
				}
				if live := h.fv.Live()[p.name]; len(live) != 0 {
					t.Errorf("left at the vendor after delete: %v", live)
				}
				if h.tr.Tracked(ref.Provider, ref.BatchID) || h.tr.InFlight() != 0 {
					t.Errorf("still tracked after delete")
				}
			})
		}
	}
}

func TestDelete(t *testing.T) {
	cases := []struct {
		name    string
		opts    fakevendor.Options
		wantErr bool
	}{
		{"deleting a batch still in flight cancels it and leaves nothing", fakevendor.Options{Outcome: fakevendor.OutcomeNever}, false},
		{"a vendor that fails the delete makes Delete fail and keeps tracking", fakevendor.Options{FailDeletes: true}, true},
	}
	for _, p := range providers {
		for _, tc := range cases {
			t.Run(p.name+": "+tc.name, func(t *testing.T) {
				h := newHarness(t, tc.opts, period)
				ref := h.submit(t, p, "uid-del", "hello", "")
				if tc.opts.FailDeletes {
					h.waitEnd(t, ref)
				}
				err := h.tr.Delete(context.Background(), ref)
				if (err != nil) != tc.wantErr {
					t.Fatalf("delete: %v, wantErr %v", err, tc.wantErr)
				}
				if tc.wantErr {
					if !h.tr.Tracked(ref.Provider, ref.BatchID) {
						t.Errorf("a failed delete stopped tracking")
					}
					return
				}
				if live := h.fv.Live()[p.name]; len(live) != 0 {
					t.Errorf("left at the vendor: %v", live)
				}
				// Deleting what is already gone is not an error.
				if err := h.tr.Delete(context.Background(), ref); err != nil {
					t.Errorf("second delete: %v", err)
				}
			})
		}
	}
}

func TestCancelOfEndedBatchReportsHowItEnded(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name+": cancel after the end is not an error", func(t *testing.T) {
			h := newHarness(t, fakevendor.Options{}, period)
			ref := h.submit(t, p, "uid-c", "hello", "")
			h.waitEnd(t, ref)
			s, err := h.tr.Cancel(context.Background(), ref)
			if err != nil || s.State != batchv1.State_STATE_SUCCEEDED {
				t.Errorf("cancel = %+v, %v; want SUCCEEDED", s, err)
			}
		})
	}
}
