package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/vendors"
	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
)

// TestRealtimeSessionOfThreePrompts: the definition's prompt runs as the
// first turn, then three prompts each resume the session id the turn
// before reported, stream their events stamped as in a Job run, and reach
// NATS too; Close ends the run with exit 0 and the session id in the log.
func TestRealtimeSessionOfThreePrompts(t *testing.T) {
	for vendor, model := range vendorModels {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			p := newRealtimePod(t, realtimeSpec(model, "start the session"))
			p.withNATS()
			s := p.serve()
			s.waitIdle(p.token, 1)
			uid := p.env[runspec.EnvAgentUID]
			var sessionID string
			var streamed []string
			texts := []string{"first question", "second question", "third question"}
			for i, text := range texts {
				tr, err := s.prompt(p.token, text)
				if err != nil {
					t.Fatalf("prompt %d: %v", i+1, err)
				}
				if tr.end.GetIsError() || tr.end.GetExitCode() != 0 {
					t.Fatalf("prompt %d ended in error: %v", i+1, tr.end)
				}
				if k := kinds(tr.events); k["result"] != 1 || k["message"] == 0 {
					t.Fatalf("prompt %d streamed kinds %v, want messages and one result", i+1, k)
				}
				if i == 0 {
					sessionID = tr.end.GetSessionId()
				}
				if sessionID == "" || tr.end.GetSessionId() != sessionID {
					t.Fatalf("prompt %d ended with session %q, want %q", i+1, tr.end.GetSessionId(), sessionID)
				}
				for _, ev := range tr.events {
					if ev.GetRun().GetUid() != uid || ev.GetId() != fmt.Sprintf("%s-%d", uid, ev.GetSequence()) || ev.GetVendor() != vendor {
						t.Fatalf("event not stamped as in a Job run: %v", ev)
					}
					if ev.GetResult() != nil && ev.GetSessionId() != sessionID {
						t.Fatalf("result event reports session %q, want %q", ev.GetSessionId(), sessionID)
					}
					streamed = append(streamed, ev.GetId())
				}
			}
			starts := p.cliStarts()
			if len(starts) != 4 || strings.Contains(starts[0], sessionID) {
				t.Fatalf("CLI starts %q: want the initial turn without a resume, then three", starts)
			}
			for i, text := range texts {
				if !strings.Contains(starts[i+1], sessionID) || !strings.Contains(starts[i+1], text) {
					t.Fatalf("turn %d argv %q does not resume %s with %q", i+2, starts[i+1], sessionID, text)
				}
			}
			in := s.info(p.token)
			if in.GetTurns() != 4 || in.GetSessionId() != sessionID || in.GetLastPromptAt() == nil ||
				!in.GetStartedAt().AsTime().Before(in.GetLastPromptAt().AsTime()) {
				t.Fatalf("info %v", in)
			}

			resp, err := s.closeSession(p.token)
			if err != nil || resp.GetSessionId() != sessionID || resp.GetTurns() != 4 {
				t.Fatalf("Close = %v, %v", resp, err)
			}
			r := s.exit(30 * time.Second)
			if r.code != 0 {
				t.Fatalf("exit %d after Close, want 0", r.code)
			}
			v, _ := vendors.ByName(vendor)
			if got := vendors.LastSessionID(v, r.stdout); got != sessionID {
				t.Fatalf("session id read from the log %q, want %q", got, sessionID)
			}
			if lc := terminal(t, r.stdout); lc.GetStatus() != "succeeded" || lc.GetReason() != "closed" || lc.GetExitCode() != 0 {
				t.Fatalf("terminal event %v", lc)
			}
			evs := p.natsEvents()
			checkStream(t, evs, 1)
			ids := map[string]bool{}
			for _, ev := range evs {
				ids[ev.GetId()] = true
			}
			for _, id := range streamed {
				if !ids[id] {
					t.Fatalf("streamed event %s never reached NATS", id)
				}
			}
			if k := kinds(evs); k["result"] != 4 {
				t.Fatalf("NATS holds %d results, want one per turn", k["result"])
			}
		})
	}
}

// TestRealtimeResumedSessionSendsNoInitialPrompt: with resumeSession the
// CLI does not start until the first Prompt, which resumes that id.
func TestRealtimeResumedSessionSendsNoInitialPrompt(t *testing.T) {
	t.Parallel()
	const resumed = "5d0c2f1e-7a3b-4c9d-8e21-0a1b2c3d4e5f"
	spec := realtimeSpec(vendorModels["claude"], "this initial prompt must not be sent")
	spec.ResumeSession = resumed
	p := newRealtimePod(t, spec)
	s := p.serve()
	in := s.info(p.token)
	if in.GetSessionId() != resumed || in.GetTurns() != 0 || in.GetState() != supervisorv1.SessionState_SESSION_STATE_IDLE {
		t.Fatalf("info before the first prompt %v", in)
	}
	time.Sleep(300 * time.Millisecond) // room for a wrongly started CLI to show
	if starts := p.cliStarts(); starts != nil {
		t.Fatalf("the CLI started before any prompt: %q", starts)
	}
	tr, err := s.prompt(p.token, "carry on where we stopped")
	if err != nil || tr.end.GetIsError() || tr.end.GetSessionId() != resumed {
		t.Fatalf("first prompt: %v, %v", tr.end, err)
	}
	starts := p.cliStarts()
	if len(starts) != 1 || !strings.Contains(starts[0], "--resume "+resumed) ||
		!strings.Contains(starts[0], "carry on where we stopped") || strings.Contains(starts[0], "initial prompt") {
		t.Fatalf("CLI starts %q: want one resuming %s with the prompt's text", starts, resumed)
	}
	if _, err := s.closeSession(p.token); err != nil {
		t.Fatal(err)
	}
	if r := s.exit(30 * time.Second); r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
}

// TestRealtimeResumedSessionStartsFreshWithoutItsConversation: when the
// store could not serve the session to resume, init still succeeds and the
// session starts fresh: it waits for the first prompt, which runs the CLI
// without --resume (it would fail on a session it does not have) and
// answers under a new session id.
func TestRealtimeResumedSessionStartsFreshWithoutItsConversation(t *testing.T) {
	t.Parallel()
	const resumed = "5d0c2f1e-7a3b-4c9d-8e21-0a1b2c3d4e5f"
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer store.Close()
	spec := realtimeSpec(vendorModels["claude"], "this initial prompt must not be sent")
	spec.ResumeSession = resumed
	p := newRealtimePod(t, spec)
	p.env[runspec.EnvConversationSource] = store.URL
	p.env[runspec.EnvConversationID] = resumed
	if r := p.run("init"); r.code != 0 {
		t.Fatalf("init exit %d, want 0 with the store down", r.code)
	}
	s := p.serve()
	in := s.info(p.token)
	if in.GetSessionId() != "" || in.GetTurns() != 0 || in.GetState() != supervisorv1.SessionState_SESSION_STATE_IDLE {
		t.Fatalf("info before the first prompt %v: want a fresh, idle session", in)
	}
	time.Sleep(300 * time.Millisecond) // room for a wrongly started CLI to show
	if starts := p.cliStarts(); starts != nil {
		t.Fatalf("the CLI started before any prompt: %q", starts)
	}
	tr, err := s.prompt(p.token, "where were we?")
	if err != nil || tr.end.GetIsError() || tr.end.GetSessionId() == "" || tr.end.GetSessionId() == resumed {
		t.Fatalf("first prompt: %v, %v; want an answer in a new session", tr.end, err)
	}
	starts := p.cliStarts()
	if len(starts) != 1 || strings.Contains(starts[0], "--resume") || !strings.Contains(starts[0], "where were we?") {
		t.Fatalf("CLI starts %q: want one fresh start with the prompt's text", starts)
	}
	if _, err := s.closeSession(p.token); err != nil {
		t.Fatal(err)
	}
	if r := s.exit(30 * time.Second); r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
}

// TestRealtimeRefusesWrongToken: every RPC without the run's own token is
// Unauthenticated and starts nothing; the right token still works after.
func TestRealtimeRefusesWrongToken(t *testing.T) {
	t.Parallel()
	p := newRealtimePod(t, realtimeSpec(vendorModels["claude"], ""))
	s := p.serve()
	uid := p.env[runspec.EnvAgentUID]
	otherKey := []byte(strings.Repeat("o", realtime.MinKeyBytes))
	cases := []struct {
		name, field, meta string
	}{
		{"a missing token is refused", "", ""},
		{"a wrong token is refused", "not-the-token", ""},
		{"another run's token is refused", realtime.Token(testKey, uid+"-other"), ""},
		{"the uid itself is refused", uid, ""},
		{"a token derived with another key is refused", realtime.Token(otherKey, uid), ""},
		{"a wrong token in metadata is refused", "", "not-the-token"},
		{"a wrong field wins over a right metadata token", "not-the-token", p.token},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if tc.meta != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, realtime.MetadataKey, tc.meta)
		}
		var errs []error
		if stream, err := s.client.Prompt(ctx, &supervisorv1.PromptRequest{Token: tc.field, Text: "mock:hang do something"}); err != nil {
			errs = append(errs, err)
		} else {
			_, err := stream.Recv()
			errs = append(errs, err)
		}
		_, err := s.client.Info(ctx, &supervisorv1.InfoRequest{Token: tc.field})
		errs = append(errs, err)
		_, err = s.client.Close(ctx, &supervisorv1.CloseRequest{Token: tc.field})
		errs = append(errs, err)
		cancel()
		for i, err := range errs {
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s: call %d = %v, want Unauthenticated", tc.name, i, err)
			}
		}
	}
	if starts := p.cliStarts(); starts != nil {
		t.Fatalf("a refused call started the CLI: %q", starts)
	}
	if cliLines, _ := stdoutEvents(t, s.out.Bytes()); len(cliLines) != 0 {
		t.Fatalf("a refused call produced CLI output: %q", cliLines)
	}
	// The token also works from metadata, and the session is intact.
	ctx := metadata.AppendToOutgoingContext(context.Background(), realtime.MetadataKey, p.token)
	if in, err := s.client.Info(ctx, &supervisorv1.InfoRequest{}); err != nil || in.GetTurns() != 0 {
		t.Fatalf("Info with the metadata token = %v, %v", in, err)
	}
	if tr, err := s.prompt(p.token, "now with the right token"); err != nil || tr.end.GetIsError() {
		t.Fatalf("prompt with the right token: %v, %v", tr.end, err)
	}
	if _, err := s.closeSession(p.token); err != nil {
		t.Fatal(err)
	}
	if r := s.exit(30 * time.Second); r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
}

// TestRealtimeRunsOneTurnAtATime: a Prompt while a turn runs is refused
// with FailedPrecondition; Close stops the running turn, whose stream ends
// with session-ended, and the run still exits 0 with the session id.
func TestRealtimeRunsOneTurnAtATime(t *testing.T) {
	t.Parallel()
	p := newRealtimePod(t, realtimeSpec(vendorModels["claude"], ""))
	s := p.serve()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := s.client.Prompt(ctx, &supervisorv1.PromptRequest{Token: p.token, Text: "mock:hang think for a long time"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetEvent() == nil {
		t.Fatalf("first message %v, %v", first, err)
	}
	if in := s.info(p.token); in.GetState() != supervisorv1.SessionState_SESSION_STATE_BUSY {
		t.Fatalf("state during a turn %v", in.GetState())
	}
	_, err = s.prompt(p.token, "are you done yet")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "already running") {
		t.Fatalf("concurrent prompt = %v, want FailedPrecondition", err)
	}
	resp, err := s.closeSession(p.token)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := readTurn(t, stream)
	if err != nil {
		t.Fatal(err)
	}
	if !tr.end.GetIsError() || tr.end.GetReason() != "session-ended" || tr.end.GetSessionId() == "" {
		t.Fatalf("stopped turn ended with %v", tr.end)
	}
	r := s.exit(30 * time.Second)
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	v, _ := vendors.ByName("claude")
	if got := vendors.LastSessionID(v, r.stdout); got == "" || got != resp.GetSessionId() || got != tr.end.GetSessionId() {
		t.Fatalf("log session %q, Close %q, turn %q", got, resp.GetSessionId(), tr.end.GetSessionId())
	}
	if starts := p.cliStarts(); len(starts) != 1 {
		t.Fatalf("the refused prompt started a CLI: %q", starts)
	}
}

// TestRealtimeSessionEndsByItself: the idle limit (counted from the last
// turn's end, not during it) and the run's deadline end the session
// cleanly, each with its own reason.
func TestRealtimeSessionEndsByItself(t *testing.T) {
	tests := []struct {
		name, prompt string
		env          map[string]string
		reason       string
		// result says whether the initial turn must have completed.
		result  bool
		atLeast time.Duration
	}{
		{name: "the idle limit ends a session that gets no prompt", env: map[string]string{realtime.EnvIdleSeconds: "1"},
			reason: "idle", atLeast: time.Second},
		{name: "the idle limit does not cut a running turn", prompt: "mock:slow take your time",
			env:    map[string]string{realtime.EnvIdleSeconds: "1", "MOCKAGENT_DELAY": "300ms"},
			reason: "idle", result: true, atLeast: 2 * time.Second},
		{name: "the deadline ends the session and its running turn", prompt: "mock:hang never answer",
			env:    map[string]string{runspec.EnvDeadlineMS: "2500"},
			reason: "deadline", atLeast: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newRealtimePod(t, realtimeSpec(vendorModels["claude"], tt.prompt))
			for k, v := range tt.env {
				p.env[k] = v
			}
			began := time.Now()
			s := p.serve()
			r := s.exit(30 * time.Second)
			if r.code != 0 {
				t.Fatalf("exit %d, want 0", r.code)
			}
			if d := time.Since(began); d < tt.atLeast {
				t.Fatalf("ended after %v, before %v", d, tt.atLeast)
			}
			if lc := terminal(t, r.stdout); lc.GetStatus() != "succeeded" || lc.GetReason() != tt.reason {
				t.Fatalf("terminal event %v, want succeeded/%s", lc, tt.reason)
			}
			if got := strings.Contains(string(r.stdout), `"type":"result"`); got != tt.result {
				t.Fatalf("initial turn's result on stdout = %v, want %v", got, tt.result)
			}
		})
	}
}

// TestRealtimeSIGTERMEndsSession: SIGTERM stops the running turn and the
// supervisor exits as a terminated Job run does.
func TestRealtimeSIGTERMEndsSession(t *testing.T) {
	t.Parallel()
	p := newRealtimePod(t, realtimeSpec(vendorModels["claude"], "mock:hang never answer"))
	s := p.serve()
	if in := s.info(p.token); in.GetState() != supervisorv1.SessionState_SESSION_STATE_BUSY {
		t.Fatalf("initial turn not running: %v", in)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := s.exit(30 * time.Second)
	if r.code != 143 {
		t.Fatalf("exit %d, want 143", r.code)
	}
	if lc := terminal(t, r.stdout); lc.GetStatus() != "failed" || lc.GetReason() != "terminated" || lc.GetExitCode() != 143 {
		t.Fatalf("terminal event %v", lc)
	}
}

// TestRealtimeServesHealthAndReflection: the session server answers gRPC
// health for the whole server and the service, and lists its services.
func TestRealtimeServesHealthAndReflection(t *testing.T) {
	t.Parallel()
	p := newRealtimePod(t, realtimeSpec(vendorModels["claude"], ""))
	s := p.serve()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(s.conn)
	for _, svc := range []string{"", supervisorv1.SessionService_ServiceDesc.ServiceName} {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q = %v, %v", svc, resp, err)
		}
	}
	rs, err := reflectionpb.NewServerReflectionClient(s.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, svc := range resp.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
	}
	for _, want := range []string{"agentplane.supervisor.v1.SessionService", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Fatalf("reflection lists %q, missing %s", names, want)
		}
	}
	if err := rs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("reflection stream did not end: %v", err)
	}
	if _, err := s.closeSession(p.token); err != nil {
		t.Fatal(err)
	}
	if r := s.exit(30 * time.Second); r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
}

// TestRealtimeNeedsItsToken: a run without a token fails before anything
// is served or started.
func TestRealtimeNeedsItsToken(t *testing.T) {
	tests := []struct {
		name    string
		content string
		unset   bool
	}{
		{name: "an empty token is refused", content: ""},
		{name: "a token of only whitespace is refused", content: " \n\t\n"},
		{name: "an unset token is refused", unset: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newRealtimePod(t, realtimeSpec(vendorModels["claude"], "hello"))
			p.env[realtime.EnvToken] = tt.content
			if tt.unset {
				delete(p.env, realtime.EnvToken)
			}
			r := p.run("run")
			if r.code != 78 {
				t.Fatalf("exit %d, want 78", r.code)
			}
			if lc := terminal(t, r.stdout); lc.GetStatus() != "failed" || lc.GetReason() != "realtime-setup" {
				t.Fatalf("terminal event %v", lc)
			}
			if strings.Contains(string(r.stderr), "realtime session serving") || p.cliStarts() != nil {
				t.Fatal("served or started the CLI without a token")
			}
		})
	}
}
