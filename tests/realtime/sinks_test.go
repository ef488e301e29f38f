package realtime

import (
	"slices"
	"testing"
	"time"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/tests/internal/receiver"
	"github.com/agentplane/agentplane/tests/internal/runs"
)

// TestAnHTTPSinkReceivesEveryEventOfARealtimeTurn: a receiver that knows
// only the documented payload gets each line of a realtime turn and the
// session's own events once, in order, each naming the Agent and its pod.
func TestAnHTTPSinkReceivesEveryEventOfARealtimeTurn(t *testing.T) {
	ns := suite.Env.Namespace(t)
	rcv := receiver.New(t)
	recipe(t, ns, "hooked", func(s *agentsv1alpha1.AgentDefinitionSpec) {
		s.Output = &agentsv1alpha1.OutputSpec{Sinks: []agentsv1alpha1.OutputSink{{Type: agentsv1alpha1.SinkHTTP, URL: rcv.URL}}}
	})
	token := caller(t, ns, "bob", true)
	launch(t, ns, "chat", "hooked", "")
	waitFor(t, ns, "chat", 60*time.Second, "Running", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase == agentsv1alpha1.PhaseRunning })
	c := promptClient(t)
	if tr := promptWhenReady(t, c, token, ns, "chat", "what changed?"); tr.end == nil || tr.events == 0 {
		t.Fatalf("turn: %d events, end %v", tr.events, tr.end)
	}
	if _, err := c.Close(as(token), &realtimev1.CloseRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: "chat"}}); err != nil {
		t.Fatal(err)
	}
	a := waitFor(t, ns, "chat", 60*time.Second, "terminal", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() })
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
		t.Fatalf("status %+v", a.Status)
	}

	stored := runs.Stored(t, suite.NATSURL, ns, "chat", natsOpts...)
	want := receiver.Expected(stored)
	var lines []string
	for _, ev := range stored {
		if len(ev.GetRaw()) > 0 {
			lines = append(lines, ev.GetId())
		}
	}
	if len(lines) == 0 {
		t.Fatal("the turn stored no CLI line")
	}
	var ids []string
	for _, p := range rcv.Payloads() {
		ids = append(ids, p.ID)
		if p.Source.Agent != "chat" || p.Source.Namespace != ns || p.Source.Pod == "" {
			t.Errorf("payload %s has source %+v, want agent chat in %s from its pod", p.ID, p.Source, ns)
		}
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("the receiver got %v,\nwant %v", ids, want)
	}
	if lcs := rcv.Lifecycles("chat"); len(lcs) == 0 || lcs[len(lcs)-1] != "agent/succeeded" {
		t.Errorf("lifecycle payloads %v, want agent/succeeded last", lcs)
	}
}
