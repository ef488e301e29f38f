package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
)

// fakeGateway is a small PromptService that records what reached it and
// answers by the prompt's text: "busy" is refused as a running turn would
// be, "denied" as a caller without RBAC, "fail" ends its turn in error,
// anything else echoes and ends well.
type fakeGateway struct {
	realtimev1.UnimplementedPromptServiceServer
	mu      sync.Mutex
	prompts []string
	auth    []string
	refs    []string
	closed  int
}

func (f *fakeGateway) note(ctx context.Context, ref *realtimev1.AgentRef) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.auth = append(f.auth, strings.Join(md.Get("authorization"), ","))
	f.refs = append(f.refs, ref.GetNamespace()+"/"+ref.GetName())
}

func (f *fakeGateway) Prompt(req *realtimev1.PromptRequest, stream grpc.ServerStreamingServer[realtimev1.PromptResponse]) error {
	f.mu.Lock()
	f.note(stream.Context(), req.GetAgent())
	f.prompts = append(f.prompts, req.GetText())
	f.mu.Unlock()
	switch req.GetText() {
	case "busy":
		return status.Error(codes.FailedPrecondition, "Agent x: a turn is already running")
	case "denied":
		return status.Error(codes.PermissionDenied, "alice may not create agents/prompt")
	}
	ev := &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_MESSAGE, Payload: &eventsv1.RunEvent_Message{Message: &eventsv1.Message{Role: "assistant", Text: "echo: " + req.GetText()}}}
	if err := stream.Send(&realtimev1.PromptResponse{Item: &realtimev1.PromptResponse_Event{Event: ev}}); err != nil {
		return err
	}
	end := &realtimev1.TurnEnd{SessionId: "sess-1"}
	if req.GetText() == "fail" {
		code := int32(3)
		end = &realtimev1.TurnEnd{SessionId: "sess-1", IsError: true, Reason: "exit-code", ExitCode: &code}
	}
	return stream.Send(&realtimev1.PromptResponse{Item: &realtimev1.PromptResponse_TurnEnd{TurnEnd: end}})
}

func (f *fakeGateway) Close(ctx context.Context, req *realtimev1.CloseRequest) (*realtimev1.CloseResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.note(ctx, req.GetAgent())
	f.closed++
	return &realtimev1.CloseResponse{SessionId: "sess-1", Turns: int32(len(f.prompts))}, nil
}

func startFakeGateway(t *testing.T) (*fakeGateway, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeGateway{}
	srv := grpc.NewServer()
	realtimev1.RegisterPromptServiceServer(srv, f)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return f, l.Addr().String()
}

// agentctlIn runs the CLI in-process with stdin and returns stdout,
// stderr and the exit code.
func agentctlIn(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	var ec *exitCodeError
	switch {
	case errors.As(err, &ec):
		errOut.WriteString(ec.msg)
		return out.String(), errOut.String(), ec.code
	case err != nil:
		errOut.WriteString(err.Error())
		return out.String(), errOut.String(), exitError
	}
	return out.String(), errOut.String(), 0
}

// TestPromptExitCodeFollowsTheTurn: a good turn prints its events and
// exits 0; a turn ending in error or a refused call exits non-zero with
// the reason or the gateway's status.
func TestPromptExitCodeFollowsTheTurn(t *testing.T) {
	f, addr := startFakeGateway(t)
	for _, tc := range []struct {
		name, text string
		code       int
		out, err   string
	}{
		{"a good turn streams its events and exits 0", "hello there", 0, "echo: hello there", ""},
		{"a turn ending in error exits 1 with its reason", "fail", exitError, "echo: fail", "turn ended in error: exit-code (exit 3)"},
		{"a busy session exits 1 with the gateway's status", "busy", exitError, "", "FailedPrecondition: Agent x: a turn is already running"},
		{"a denied caller exits 1 with the gateway's status", "denied", exitError, "", "PermissionDenied: alice may not create agents/prompt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := agentctlIn(t, "", "prompt", "chat-1", tc.text, "--gateway", addr, "--token", "tok-1", "-n", "team-a")
			if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.err) {
				t.Fatalf("exit %d, out %q, err %q; want exit %d, out containing %q, err containing %q", code, out, errOut, tc.code, tc.out, tc.err)
			}
			if code == 0 && !strings.Contains(out, "turn_end") {
				t.Fatalf("no turn end line in %q", out)
			}
		})
	}
	for i, a := range f.auth {
		if a != "Bearer tok-1" || f.refs[i] != "team-a/chat-1" {
			t.Fatalf("call %d reached the gateway as %q for %q", i, a, f.refs[i])
		}
	}
}

// TestChatSendsOneTurnPerLineAndClosesAtEOF: every non-empty line of
// stdin is one turn, streamed; a busy session is reported and the chat
// goes on; the end of stdin closes the session; a refusal no later line
// can change ends the chat without closing.
func TestChatSendsOneTurnPerLineAndClosesAtEOF(t *testing.T) {
	f, addr := startFakeGateway(t)
	out, errOut, code := agentctlIn(t, "first line\n\n  \nbusy\nsecond line\n", "chat", "chat-1", "--gateway", addr, "--token", "tok", "-n", "team-a")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := []string{"first line", "busy", "second line"}; strings.Join(f.prompts, "|") != strings.Join(want, "|") {
		t.Fatalf("prompts %q, want %q", f.prompts, want)
	}
	if !strings.Contains(out, "echo: first line") || !strings.Contains(out, "echo: second line") || !strings.Contains(errOut, "a turn is already running") {
		t.Fatalf("out %q err %q", out, errOut)
	}
	if f.closed != 1 || !strings.Contains(out, "session sess-1 closed after 3 turns") {
		t.Fatalf("closed %d times; out %q", f.closed, out)
	}

	f2, addr2 := startFakeGateway(t)
	_, errOut, code = agentctlIn(t, "denied\nnever sent\n", "chat", "chat-1", "--gateway", addr2, "--token", "tok", "-n", "team-a")
	if code == 0 || !strings.Contains(errOut, "PermissionDenied") || len(f2.prompts) != 1 || f2.closed != 0 {
		t.Fatalf("exit %d, err %q, prompts %q, closed %d; want the chat to end at the refusal", code, errOut, f2.prompts, f2.closed)
	}
}
