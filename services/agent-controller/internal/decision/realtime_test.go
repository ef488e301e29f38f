package decision

import (
	"testing"

	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

func realtimeSnap(a *agentsv1alpha1.Agent) Snapshot {
	s := snap(a)
	s.Definition.Spec.Execution = agentsv1alpha1.ExecutionRealtime
	s.Config.RealtimeEnabled = true
	return s
}

func TestRealtimeRuns(t *testing.T) {
	claudeLog := `{"type":"system","subtype":"init","session_id":"sess-1","model":"claude-opus-5-5"}
{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"sess-2"}
`
	cases := []planCase{
		{"admission: a realtime run gets its token Secret before its Job", func() Snapshot { return realtimeSnap(agent("a", "")) },
			func(t *testing.T, p Plan) {
				if p.CreateJob == nil || !p.RunToken {
					t.Errorf("want a Job and a token: %+v", p)
				}
				if p.CreateJob.Spec.Template.Labels[agentsv1alpha1.LabelExecution] != "realtime" {
					t.Error("the pod carries the agents.re-cinq.com/execution: realtime label")
				}
			}},
		{"admission: a job run needs no token", func() Snapshot { return snap(agent("a", "")) },
			func(t *testing.T, p Plan) {
				if p.CreateJob == nil || p.RunToken {
					t.Errorf("plan: %+v", p)
				}
			}},
		{"end: the Agent goes terminal with status.sessionId read from the pod log", func() Snapshot {
			s := realtimeSnap(agent("a", ""))
			admitted := Decide(s)
			r := agent("a", agentsv1alpha1.PhaseRunning)
			s.Agent = r
			j := admitted.CreateJob
			j.Status.Conditions = append(j.Status.Conditions, complete)
			s.Job = RunJobOf(j)
			s.Pod = PodOutcome{Found: true, ExitCode: ptr.To[int32](0), Log: claudeLog}
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseSucceeded, 0, "")
			if p.Status.SessionID != "sess-2" {
				t.Errorf("sessionId %q, want the newest one in the log", p.Status.SessionID)
			}
		}},
		{"end: a job run's log does not set sessionId", func() Snapshot {
			return jobRun(agentsv1alpha1.PhaseRunning, PodOutcome{Found: true, ExitCode: ptr.To[int32](0), Log: claudeLog}, complete)
		}, func(t *testing.T, p Plan) {
			if p.Status == nil || p.Status.SessionID != "" {
				t.Errorf("status: %+v", p.Status)
			}
		}},
		{"a realtime definition fails at Pending when the realtime component is off", func() Snapshot {
			s := snap(agent("a", ""))
			s.Definition.Spec.Execution = agentsv1alpha1.ExecutionRealtime
			return s
		}, func(t *testing.T, p Plan) { wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, ReasonRealtimeDisabled) }},
		{"realtime: resources.conversation.id is refused with the matching reason", func() Snapshot {
			s := realtime(agent("a", ""))
			s.Definition.Spec.Resources.Conversation.ID = "c1"
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "resources.conversation.id")
		}},
		{"realtime: resumeSession needs resources.conversation.source", func() Snapshot {
			a := agent("a", "")
			a.Spec.ResumeSession = "sess-1"
			s := realtime(a)
			s.Definition.Spec.Resources.Conversation.Source = ""
			return s
		}, func(t *testing.T, p Plan) { wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, ReasonResumeNeedsSource) }},
		{"realtime: a vendor that cannot resume is refused by name", func() Snapshot {
			a := agent("a", "")
			a.Spec.ResumeSession = "sess-1"
			a.Spec.Model = "exec"
			return realtime(a)
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "exec cannot resume a session")
		}},
		{"realtime: a valid realtime run gets a Job labelled realtime", func() Snapshot {
			a := agent("a", "")
			a.Spec.ResumeSession = "sess-1"
			return realtime(a)
		}, func(t *testing.T, p Plan) {
			if p.CreateJob == nil || p.CreateJob.Spec.Template.Labels[agentsv1alpha1.LabelExecution] != "realtime" {
				t.Fatalf("plan %+v", p)
			}
		}},
	}
	runPlanCases(t, cases)
}

// realtime is a snapshot of a on a realtime definition whose conversation
// store is set, so a resumeSession can be honoured.
func realtime(a *agentsv1alpha1.Agent) Snapshot {
	s := snap(a)
	s.Config.RealtimeEnabled = true
	s.Definition.Spec.Execution = agentsv1alpha1.ExecutionRealtime
	s.Definition.Spec.Resources = &agentsv1alpha1.AgentResources{Conversation: &agentsv1alpha1.ConversationSpec{Source: "https://store"}}
	return s
}
