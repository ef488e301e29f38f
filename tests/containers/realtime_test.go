package containers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/tests/internal/runs"
	"github.com/agentplane/agentplane/tests/internal/stack"
)

// TestRealtimeGatewayKilledMidSessionAndRunPodCutOff is the realtime
// suite: a realtime Agent's session (its run pod on localnode, the mock
// claude CLI) is prompted through realtime-gateway's public API as a
// ServiceAccount, with a token for the gateway's audience, as `agentctl
// prompt` does.
//
// First the gateway gets SIGKILL while a turn streams to its caller, and is
// started again. The caller must hear Unavailable, and the next prompt
// must be served and continue the same session: the turn resumes the
// session id the session began with, the Agent's status.sessionId and
// GetSession's start time stay, and the turns counted go on from where
// they were (the gateway is stateless; the session lives in the pod,
// docs/realtime-gateway.md).
//
// Then the run pod's session port is cut off (loopCut: its packets are
// dropped, nothing refused), once while a turn streams to the caller and
// once between turns with the gateway's connection to the pod open and
// idle. Each time the open call must end Unavailable, naming the Agent and
// its unreachable pod, within the gateway's keepalive bound; a second
// prompt while the cut lasts, which must connect anew, must get the same
// within the dial timeout; and once the cut heals the next prompt must be
// served in the same session. Every call is guarded: a gateway that hangs
// fails the suite. At the end the session is closed and the Agent must end
// Succeeded with the id the session began with.
func TestRealtimeGatewayKilledMidSessionAndRunPodCutOff(t *testing.T) {
	// Every realtime pod listens on the host's port 8090: one suite at a
	// time, whatever the package. Taken first, so it is let go last, once
	// the node has stopped the pod.
	unlock, err := stack.LockRealtimePort()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	cut := newLoopCut(t, realtimePort)
	p := startPlatform(t, platformOptions{replicas: 1, poll: 5 * time.Second, controllerArgs: []string{
		"--realtime-enabled", "--realtime-key-namespace=" + realtimeNS, "--gateway-namespace=" + realtimeNS}})
	kube, err := kubernetes.NewForConfig(p.kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := stack.CreateRealtimeKey(t.Context(), kube, realtimeNS); err != nil {
		t.Fatalf("create the realtime key: %v", err)
	}
	gw := p.startGateway(t)

	kills := size(1, 5)
	cutRounds := size(1, 3)
	ns := p.namespace(t, "realtime")
	p.realtimeStation(t, ns, "chat", size(10*time.Minute, 30*time.Minute))
	token := runs.PromptCaller(t, kube, ns, "alice", true)
	p.launch(t, ns, "chat", "talk")
	ref := &realtimev1.AgentRef{Namespace: ns, Name: "talk"}
	runs.WaitFor(t, p.cl, ns, "talk", 3*time.Minute, "Running", func(a *agentsv1alpha1.Agent) bool {
		return a.Status.Phase == agentsv1alpha1.PhaseRunning
	}, nil)

	first := gw.promptUntilServed(t, token, ref, "hello", 2*time.Minute)
	id := first.end.GetSessionId()
	if id == "" || first.end.GetIsError() || first.events == 0 {
		t.Fatalf("the first prompt: %d events, turn end %v", first.events, first.end)
	}
	began := gw.session(t, token, ref)
	// The session's turns: those the suite knows ran, and at most one
	// more for each prompt written into a cut connection and answered
	// Unavailable (if the gateway closes that connection before the
	// kernel gives up on it, TCP may still deliver the prompt once the cut
	// heals).
	turns, mayHaveRun := began.GetTurns(), int32(0)
	ss := &sessionCheck{gw: gw, p: p, token: token, ref: ref, id: id, startedAt: began.GetStartedAt().AsTime()}

	// The gateway killed while a turn streams to its caller.
	var interrupted []string
	var readyAfter, servedAfter []time.Duration
	// busy counts the prompts after a restart refused because the turn
	// the killed gateway left was still running in the pod.
	busy := 0
	for i := range kills {
		call := gw.prompt(t, token, ref, slowPrompt)
		call.waitFirstEvent(t)
		gw.c.Kill()
		call.wait()
		interrupted = append(interrupted, status.Code(call.err).String())
		switch {
		case call.err == nil:
			t.Errorf("kill %d: the turn's stream ended well (%d events) though the gateway was killed while it streamed", i+1, call.events)
		case status.Code(call.err) != codes.Unavailable:
			t.Errorf("kill %d: the caller of the streaming turn heard %v, want Unavailable", i+1, call.err)
		}
		restarted := time.Now()
		gw.c.Restart()
		readyAfter = append(readyAfter, gw.waitReady(t))
		// The turn the caller lost goes on in the pod; the next prompt is
		// refused (FailedPrecondition) until it ends.
		next := gw.promptUntilServed(t, token, ref, fmt.Sprintf("after restart %d", i+1), 2*time.Minute)
		servedAfter = append(servedAfter, time.Since(restarted))
		busy += next.refused[codes.FailedPrecondition]
		ss.check(t, fmt.Sprintf("the prompt after restart %d", i+1), next)
		turns += 2
	}
	ss.checkInfo(t, "after the restarts", turns, turns)

	// The run pod cut off, while a turn streams and between turns.
	type cutFigures struct {
		// open is how long the call on the open connection took from the
		// cut to its answer, fresh how long the call that had to connect
		// took, healed how long after the heal a prompt was served.
		open, fresh, healed []time.Duration
		// messages are the distinct answers, the open call's and the
		// new connection's.
		messages []string
	}
	cases := []struct {
		name string
		// midTurn cuts while a turn streams to the caller; otherwise the
		// cut comes between turns and the prompt after it.
		midTurn bool
		figures cutFigures
	}{
		{name: "mid-turn", midTurn: true},
		{name: "between turns"},
	}
	for ci := range cases {
		c := &cases[ci]
		for round := range cutRounds {
			what := fmt.Sprintf("%s, round %d", c.name, round+1)
			// An open, idle connection to the pod and an idle session.
			ss.check(t, what+": the prompt before the cut", gw.promptUntilServed(t, token, ref, "before the cut", 2*time.Minute))
			turns++
			var call *promptCall
			var cutAt time.Time
			if c.midTurn {
				call = gw.prompt(t, token, ref, slowPrompt)
				call.waitFirstEvent(t)
				cut.Cut()
				cutAt = time.Now()
				// The turn started in the pod.
				turns++
			} else {
				cut.Cut()
				cutAt = time.Now()
				call = gw.prompt(t, token, ref, "into the cut")
				mayHaveRun++
			}
			call.wait()
			took := time.Since(cutAt)
			checkUnavailable(t, what+", the open connection", call, ref, took, gatewayKeepalive)
			if c.midTurn && call.end != nil {
				t.Errorf("%s: the turn ended (%v) before the cut reached it", what, call.end)
			}
			// No connection to reuse now: the gateway must connect anew.
			again := gw.prompt(t, token, ref, "still cut").wait()
			// (Its connection never completed, so this prompt never left.)
			checkUnavailable(t, what+", a new connection", again, ref, again.took, gatewayDialTimeout)
			cut.Heal()
			healed := time.Now()
			next := gw.promptUntilServed(t, token, ref, "after the cut", 2*time.Minute)
			ss.check(t, what+": the prompt after the cut healed", next)
			turns++
			c.figures.open = append(c.figures.open, took)
			c.figures.fresh = append(c.figures.fresh, again.took)
			c.figures.healed = append(c.figures.healed, time.Since(healed))
			for _, m := range []string{status.Convert(call.err).Message(), status.Convert(again.err).Message()} {
				if !slices.Contains(c.figures.messages, m) {
					c.figures.messages = append(c.figures.messages, m)
				}
			}
		}
	}
	ss.checkInfo(t, "after the cuts", turns, turns+mayHaveRun)

	closed := gw.closeSession(t, token, ref)
	if closed.GetSessionId() != id {
		t.Errorf("Close answered session %q, want %q", closed.GetSessionId(), id)
	}
	a := runs.WaitFor(t, p.cl, ns, "talk", 2*time.Minute, "terminal", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() }, nil)
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded || a.Status.SessionID != id {
		t.Errorf("the closed session's Agent ended %s with sessionId %q (%s), want Succeeded with %q", a.Status.Phase, a.Status.SessionID, a.Status.FailureReason, id)
	}

	for _, c := range cases {
		t.Logf("run pod cut off %s, the gateway's answers: %q", c.name, c.figures.messages)
	}
	report := fmt.Sprintf("realtime-gateway killed while a turn streamed (%d kills): the caller heard %v; ready again after %v, the next prompt served in the same session %v after the restart (%d prompts refused before, the lost turn still running in the pod)",
		kills, interrupted, roundAll(readyAfter), roundAll(servedAfter), busy)
	for _, c := range cases {
		f := c.figures
		report += fmt.Sprintf("; run pod cut off %s (%d rounds): the open call Unavailable after %v (bound %s), a new connection's after %v (bound %s), served again %v after the cut healed",
			c.name, cutRounds, roundAll(f.open), gatewayKeepalive, roundAll(f.fresh), gatewayDialTimeout, roundAll(f.healed))
	}
	report += fmt.Sprintf("; session %s went on through all of it, %d turns, closed Succeeded", id, closed.GetTurns())
	testenv.BenchReport(t, report)
}

// sessionCheck checks that a session goes on as the one it began as.
type sessionCheck struct {
	gw        *gateway
	p         *platform
	token     string
	ref       *realtimev1.AgentRef
	id        string
	startedAt time.Time
}

// check checks that a served prompt's turn went well in the session: the
// turn resumed the session's id and the Agent still records it.
func (s *sessionCheck) check(t *testing.T, what string, c served) {
	t.Helper()
	if c.end.GetIsError() || c.end.GetSessionId() != s.id || c.events == 0 {
		t.Errorf("%s: %d events, turn end %v; want a good turn of session %s", what, c.events, c.end, s.id)
	}
	var a agentsv1alpha1.Agent
	if err := s.p.cl.Get(t.Context(), types.NamespacedName{Namespace: s.ref.GetNamespace(), Name: s.ref.GetName()}, &a); err != nil {
		t.Fatalf("%s: read the Agent: %v", what, err)
	}
	if a.Status.Phase != agentsv1alpha1.PhaseRunning || a.Status.SessionID != s.id {
		t.Errorf("%s: the Agent is %s with sessionId %q, want Running with %q", what, a.Status.Phase, a.Status.SessionID, s.id)
	}
}

// checkInfo checks GetSession: the same session, started when it
// started, idle, and between least and most turns.
func (s *sessionCheck) checkInfo(t *testing.T, what string, least, most int32) {
	t.Helper()
	info := s.gw.session(t, s.token, s.ref)
	if info.GetSessionId() != s.id || !info.GetStartedAt().AsTime().Equal(s.startedAt) {
		t.Errorf("%s: GetSession says session %q started at %s, want %q started at %s: not the same session",
			what, info.GetSessionId(), info.GetStartedAt().AsTime(), s.id, s.startedAt)
	}
	if n := info.GetTurns(); n < least || n > most {
		t.Errorf("%s: GetSession counts %d turns, want %d to %d", what, n, least, most)
	}
}

// checkUnavailable checks that a call to a pod cut off ended Unavailable,
// naming the Agent and saying its pod is unreachable, within bound (plus
// realtimeSlack), took being how long it took from the cut or its start.
func checkUnavailable(t *testing.T, what string, c *promptCall, ref *realtimev1.AgentRef, took, bound time.Duration) {
	t.Helper()
	st := status.Convert(c.err)
	switch {
	case c.guardHit:
		t.Errorf("%s: the gateway did not answer within %s: it hangs", what, callGuard)
	case c.err == nil:
		t.Errorf("%s: the call ended well (%d events, turn end %v) though the pod was cut off", what, c.events, c.end)
	case st.Code() != codes.Unavailable:
		t.Errorf("%s: %v, want Unavailable", what, c.err)
	case !strings.Contains(st.Message(), "Agent "+ref.GetNamespace()+"/"+ref.GetName()) || !strings.Contains(st.Message(), "unreachable"):
		t.Errorf("%s: the message %q does not say that the Agent's pod is unreachable", what, st.Message())
	}
	if took > bound+realtimeSlack {
		t.Errorf("%s: answered after %s, past the gateway's bound of %s (+%s)", what, took.Round(time.Millisecond), bound, realtimeSlack)
	}
}
