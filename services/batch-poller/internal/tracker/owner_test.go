package tracker

import (
	"context"
	"errors"
	"strings"
	"testing"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	"github.com/agentplane/agentplane/tools/fakevendor"

	"github.com/agentplane/agentplane/services/batch-poller/internal/keys"
)

// otherNS shares the vendor account of testNS: the worst case, where the
// API key does not tell the runs apart.
const otherNS = "team-b"

func sharedAccountKeys() keys.Static {
	k := staticKeys(testKey)
	k[otherNS] = k[testNS]
	return k
}

// thieves are runs other than runFor(uid) naming its batch.
func thieves(uid string) []Run {
	return []Run{
		{Namespace: otherNS, Agent: "thief", UID: "uid-thief"},
		{Namespace: otherNS, Agent: "agent-" + uid, UID: uid},
		{Namespace: testNS, Agent: "agent-" + uid, UID: "uid-thief"},
	}
}

// attempt makes the three calls as run on ref's batch and returns their
// errors by name.
func attempt(h *harness, run Run, ref Ref) map[string]error {
	stolen := Ref{Run: run, Provider: ref.Provider, BatchID: ref.BatchID, Model: ref.Model}
	_, getErr := h.tr.Get(context.Background(), stolen)
	_, cancelErr := h.tr.Cancel(context.Background(), stolen)
	delErr := h.tr.Delete(context.Background(), stolen)
	return map[string]error{"get": getErr, "cancel": cancelErr, "delete": delErr}
}

// noCancelOrDelete fails when any cancel or delete reached fakevendor.
func noCancelOrDelete(t *testing.T, h *harness) {
	t.Helper()
	for route, n := range h.fv.AllCalls() {
		if (strings.Contains(route, "/cancel") || strings.HasPrefix(route, "DELETE") ||
			route == "POST /v1beta/batches/{id}") && n > 0 {
			t.Errorf("%s called %d times for another run's batch", route, n)
		}
	}
}

// TestTheTableGivesNoRunAnotherRunsBatch: while batches are tracked, a
// run naming another run's batch id is answered ErrNotThisRun, and a
// Submit under a uid already used in another namespace gets a batch of
// its own.
func TestTheTableGivesNoRunAnotherRunsBatch(t *testing.T) {
	h := newHarness(t, fakevendor.Options{Outcome: fakevendor.OutcomeNever}, period)
	h.halt()
	h.start(t, sharedAccountKeys(), nil)
	for _, pv := range providers {
		own := h.submit(t, pv, "uid-"+pv.name, "secret", "")
		for _, run := range thieves("uid-" + pv.name) {
			for call, err := range attempt(h, run, own) {
				if !errors.Is(err, ErrNotThisRun) {
					t.Errorf("%s: %s as %s/%s: err = %v, want ErrNotThisRun", pv.name, call, run.Namespace, run.UID, err)
				}
			}
		}
		if !h.tr.Tracked(own.Provider, own.BatchID) {
			t.Errorf("%s: the owner's batch was forgotten", pv.name)
		}
		if _, err := h.tr.Get(context.Background(), own); err != nil {
			t.Errorf("%s: the owner's get: %v", pv.name, err)
		}
	}
	noCancelOrDelete(t, h)

	t.Run("a submit under a uid of another namespace gets its own batch", func(t *testing.T) {
		first, _, err := h.tr.Submit(context.Background(), Submission{Run: Run{Namespace: otherNS, Agent: "a", UID: "uid-dup"},
			Model: "claude-opus-5-5", Prompt: "planted", MaxTokens: 8})
		if err != nil {
			t.Fatal(err)
		}
		second, _, err := h.tr.Submit(context.Background(), Submission{Run: runFor("uid-dup"), Model: "claude-opus-5-5", Prompt: "own", MaxTokens: 8})
		if err != nil || second == first {
			t.Errorf("second submit = %q, %v; want a batch other than %q", second, err, first)
		}
	})
}

// TestARestartedTrackerGivesNoRunAnotherRunsBatch: after a restart the
// table is empty, and the vendor decides. A batch that ended carries the
// request id in its results (every vendor); one in flight carries it in
// its own fields on OpenAI and Gemini. Either way a run naming another
// run's batch is answered ErrNotThisRun, nothing is cancelled or deleted,
// and the owner still gets its result.
func TestARestartedTrackerGivesNoRunAnotherRunsBatch(t *testing.T) {
	cases := []struct {
		name      string
		opts      fakevendor.Options
		providers []provider
	}{
		{"an ended batch is refused by the request id of its results",
			fakevendor.Options{Outcome: fakevendor.OutcomeComplete}, providers},
		{"a batch in flight is refused by the request id it carries",
			fakevendor.Options{Outcome: fakevendor.OutcomeNever}, providers[1:]},
	}
	for _, tc := range cases {
		for _, pv := range tc.providers {
			t.Run(tc.name+": "+pv.name, func(t *testing.T) {
				h := newHarness(t, tc.opts, period)
				own := h.submit(t, pv, "uid-own", "secret", "")
				ended := tc.opts.Outcome == fakevendor.OutcomeComplete
				if ended {
					h.waitEnd(t, own)
				}
				for _, run := range thieves("uid-own") {
					h.halt()
					h.start(t, sharedAccountKeys(), nil)
					for call, err := range attempt(h, run, own) {
						if !errors.Is(err, ErrNotThisRun) {
							t.Errorf("%s as %s/%s: err = %v, want ErrNotThisRun", call, run.Namespace, run.UID, err)
						}
					}
					if h.tr.Tracked(own.Provider, own.BatchID) {
						t.Errorf("the batch stays tracked for %s/%s", run.Namespace, run.UID)
					}
				}
				noCancelOrDelete(t, h)
				s, err := h.tr.Get(context.Background(), own)
				switch {
				case err != nil:
					t.Errorf("the owner's get: %v", err)
				case ended && s.State != batchv1.State_STATE_SUCCEEDED:
					t.Errorf("the owner's batch is %v", s.State)
				case ended && readLines(t, pv.model, s.Lines).Text != fakevendor.Answer("secret"):
					t.Errorf("the owner's answer is not its own: %v", s.Lines)
				}
			})
		}
	}
}
