package main

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/service/servicetest"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
)

// TestSessionOfThreePromptsThroughTheGateway: three prompts reach the
// supervisor through the gateway, each streams its events and one turn
// end, turns two and three resume the session the first reported, the id
// is patched into status.sessionId once (no write when it did not
// change), GetSession and Close are forwarded, and a finished Agent's
// session reads as CLOSED with its id.
func TestSessionOfThreePromptsThroughTheGateway(t *testing.T) {
	ns := env.Namespace(t)
	alice := caller(t, ns, "alice", "create", "get")
	r := running(t, ns, "chat")
	g := startGateway(t, 30*time.Second)

	var sessionID, rvAfterFirst string
	for i, text := range []string{"first question", "second question", "third question"} {
		tr, err := g.prompt(alice, ns, "chat", text)
		if err != nil {
			t.Fatalf("prompt %d: %v", i+1, err)
		}
		if tr.end.GetIsError() || tr.end.GetSessionId() == "" {
			t.Fatalf("prompt %d ended %v", i+1, tr.end)
		}
		var messages, results int
		for _, ev := range tr.events {
			if ev.GetRun().GetUid() != string(r.agent.UID) {
				t.Fatalf("event of another run: %v", ev)
			}
			if ev.GetMessage() != nil {
				messages++
			}
			if ev.GetResult() != nil {
				results++
			}
		}
		if messages == 0 || results != 1 {
			t.Fatalf("prompt %d streamed %d messages and %d results, want some and one", i+1, messages, results)
		}
		if i == 0 {
			sessionID = tr.end.GetSessionId()
			// Patched before the turn end reached the caller.
			a := r.fresh()
			if a.Status.SessionID != sessionID {
				t.Fatalf("status.sessionId %q after the first turn, want %q", a.Status.SessionID, sessionID)
			}
			rvAfterFirst = a.ResourceVersion
		} else if tr.end.GetSessionId() != sessionID {
			t.Fatalf("prompt %d ended in session %q, want %q", i+1, tr.end.GetSessionId(), sessionID)
		}
	}
	if a := r.fresh(); a.ResourceVersion != rvAfterFirst {
		t.Fatalf("the Agent was written again (resourceVersion %s → %s) though the session id did not change", rvAfterFirst, a.ResourceVersion)
	}
	starts, _ := readLines(r.starts)
	if len(starts) != 3 || strings.Contains(starts[0], sessionID) || !strings.Contains(starts[1], sessionID) || !strings.Contains(starts[2], "third question") {
		t.Fatalf("CLI starts %q: want a new session, then two resuming %s", starts, sessionID)
	}

	ctx := bearer(alice)
	ref := &realtimev1.AgentRef{Namespace: ns, Name: "chat"}
	in, err := g.client.GetSession(ctx, &realtimev1.GetSessionRequest{Agent: ref})
	if err != nil || in.GetTurns() != 3 || in.GetSessionId() != sessionID || in.GetState() != realtimev1.SessionState_SESSION_STATE_IDLE {
		t.Fatalf("GetSession = %v, %v", in, err)
	}
	if got := testutil.ToFloat64(g.app.Metrics.PromptsTotal.WithLabelValues("OK")); got != 3 {
		t.Fatalf("realtime_gateway_prompts_total{code=OK} = %v, want 3", got)
	}
	if got := testutil.ToFloat64(g.app.Metrics.SessionsActive); got != 0 {
		t.Fatalf("realtime_gateway_sessions_active = %v after the turns, want 0", got)
	}
	// The skeleton's interceptors count every call, and the build is named.
	if n, err := testutil.GatherAndCount(g.app.Metrics.Registry, "grpc_server_handled_total", "agentplane_build_info"); err != nil || n < 2 {
		t.Fatalf("grpc_server_handled_total and agentplane_build_info: %d series, %v", n, err)
	}
	// With every family exercised, the whole registry passes promlint.
	servicetest.Lint(t, g.app.Metrics.Registry)

	cl, err := g.client.Close(ctx, &realtimev1.CloseRequest{Agent: ref})
	if err != nil || cl.GetSessionId() != sessionID || cl.GetTurns() != 3 {
		t.Fatalf("Close = %v, %v", cl, err)
	}
	select {
	case <-r.exited:
		if c := r.sup.ProcessState.ExitCode(); c != 0 {
			t.Fatalf("supervisor exit %d after Close, want 0", c)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("supervisor still running after Close")
	}
	// The controller then finishes the Agent; its session reads as closed.
	r.setPhase(agentsv1alpha1.PhaseSucceeded)
	in, err = g.client.GetSession(ctx, &realtimev1.GetSessionRequest{Agent: ref})
	if err != nil || in.GetState() != realtimev1.SessionState_SESSION_STATE_CLOSED || in.GetSessionId() != sessionID {
		t.Fatalf("GetSession of the finished Agent = %v, %v", in, err)
	}
}

// TestNextPromptWorksAfterTheGatewayRestarts: the gateway holds no
// session state, so a new instance serves the next prompt of a session
// another instance began, resuming the same vendor session.
func TestNextPromptWorksAfterTheGatewayRestarts(t *testing.T) {
	ns := env.Namespace(t)
	alice := caller(t, ns, "alice", "create")
	r := running(t, ns, "chat")
	g1 := startGateway(t, 30*time.Second)
	first, err := g1.prompt(alice, ns, "chat", "before the restart")
	if err != nil || first.end.GetIsError() {
		t.Fatalf("first prompt: %v, %v", first.end, err)
	}
	g1.shutdown(time.Minute)
	if _, err := g1.prompt(alice, ns, "chat", "to a stopped gateway"); err == nil {
		t.Fatal("a stopped gateway served a prompt")
	}

	g2 := startGateway(t, 30*time.Second)
	second, err := g2.prompt(alice, ns, "chat", "after the restart")
	if err != nil || second.end.GetIsError() || second.end.GetSessionId() != first.end.GetSessionId() {
		t.Fatalf("prompt through the new gateway: %v, %v; want session %s", second.end, err, first.end.GetSessionId())
	}
	starts, _ := readLines(r.starts)
	if len(starts) != 2 || !strings.Contains(starts[1], first.end.GetSessionId()) {
		t.Fatalf("CLI starts %q: want the second turn to resume %s", starts, first.end.GetSessionId())
	}
	if got := r.fresh().Status.SessionID; got != first.end.GetSessionId() {
		t.Fatalf("status.sessionId %q", got)
	}
}
