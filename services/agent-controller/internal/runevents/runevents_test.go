package runevents

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
)

var claudeLines = []string{
	`{"type":"system","subtype":"init","session_id":"msgbatch_1","model":"claude-opus-5-5"}`,
	`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"the answer"}]},"session_id":"msgbatch_1"}`,
	`{"type":"result","subtype":"success","is_error":false,"result":"the answer","session_id":"msgbatch_1","usage":{"input_tokens":3,"output_tokens":2}}`,
}

func batchAgent(phase agentsv1alpha1.AgentPhase) *agentsv1alpha1.Agent {
	a := &agentsv1alpha1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "uid-1"},
		Spec:       agentsv1alpha1.AgentSpec{StationRef: "st", TaskID: "T-1"},
		Status:     agentsv1alpha1.AgentStatus{Phase: phase},
	}
	if phase == agentsv1alpha1.PhaseFailed {
		a.Status.ExitCode = ptr.To[int32](1)
		a.Status.FailureReason = decision.ReasonBatchTimedOut
	}
	return a
}

func TestBatchNotices(t *testing.T) {
	cases := []struct {
		rule   string
		notice decision.Notice
		agent  *agentsv1alpha1.Agent
		lines  []string
		check  func(t *testing.T, evs []*eventsv1.RunEvent)
	}{
		{"started: one agent/started event with sequence 1", decision.NoticeStarted, batchAgent(agentsv1alpha1.PhaseRunning), nil,
			func(t *testing.T, evs []*eventsv1.RunEvent) {
				if len(evs) != 1 || evs[0].GetLifecycle().GetStatus() != StatusStarted || evs[0].GetSequence() != 1 {
					t.Errorf("events: %v", evs)
				}
			}},
		{"finished: the CLI lines become the vendor's events, then agent/succeeded", decision.NoticeFinished, batchAgent(agentsv1alpha1.PhaseSucceeded), claudeLines,
			func(t *testing.T, evs []*eventsv1.RunEvent) {
				last := evs[len(evs)-1]
				if last.GetLifecycle().GetStatus() != StatusSucceeded || last.GetLifecycle().GetExitCode() != 0 {
					t.Errorf("last event: %v", last)
				}
				var text string
				for _, ev := range evs {
					if m := ev.GetMessage(); m != nil {
						text = m.GetText()
					}
					if ev.GetVendor() != "claude" || ev.GetRun().GetTaskId() != "T-1" {
						t.Errorf("envelope: %v", ev)
					}
				}
				if text != "the answer" {
					t.Errorf("message text %q", text)
				}
				if evs[0].GetSequence() != 2 || string(evs[0].GetRaw()) != claudeLines[0] {
					t.Errorf("first CLI event follows agent/started and carries its line: %v", evs[0])
				}
			}},
		{"finished: a failed run ends with agent/failed and its reason", decision.NoticeFinished, batchAgent(agentsv1alpha1.PhaseFailed), nil,
			func(t *testing.T, evs []*eventsv1.RunEvent) {
				lc := evs[len(evs)-1].GetLifecycle()
				if lc.GetStatus() != StatusFailed || lc.GetReason() == "" || lc.GetExitCode() != 1 {
					t.Errorf("lifecycle: %v", lc)
				}
			}},
		{"timeout: batch_timeout is failed under onTimeout fail", decision.NoticeTimeout, batchAgent(agentsv1alpha1.PhaseFailed), nil,
			func(t *testing.T, evs []*eventsv1.RunEvent) {
				lc := evs[0].GetLifecycle()
				if len(evs) != 1 || lc.GetPhase() != PhaseBatchTimeout || lc.GetStatus() != StatusFailed {
					t.Errorf("events: %v", evs)
				}
			}},
		{"timeout: batch_timeout is running under fallback", decision.NoticeTimeout, batchAgent(agentsv1alpha1.PhaseRunning), nil,
			func(t *testing.T, evs []*eventsv1.RunEvent) {
				if lc := evs[0].GetLifecycle(); lc.GetStatus() != StatusRunning || lc.ExitCode != nil {
					t.Errorf("lifecycle: %v", lc)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			evs := Batch(tc.notice, tc.agent, "claude-opus-5-5", tc.lines)
			if len(evs) == 0 {
				t.Fatal("no events")
			}
			tc.check(t, evs)
		})
	}
}

func TestBatchEventIDsAreStable(t *testing.T) {
	a := batchAgent(agentsv1alpha1.PhaseSucceeded)
	first := Batch(decision.NoticeFinished, a, "claude-opus-5-5", claudeLines)
	again := Batch(decision.NoticeFinished, a, "claude-opus-5-5", claudeLines)
	seen := map[string]bool{}
	for i := range first {
		if first[i].GetId() != again[i].GetId() {
			t.Errorf("event %d: id %q then %q; a resend must dedupe", i, first[i].GetId(), again[i].GetId())
		}
		if seen[first[i].GetId()] {
			t.Errorf("duplicate id %q", first[i].GetId())
		}
		seen[first[i].GetId()] = true
	}
	if first[0].GetId() != "uid-1-batch-2" {
		t.Errorf("ids live apart from a fallback Job's uid-<seq>: %q", first[0].GetId())
	}
}
