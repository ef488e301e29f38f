package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
)

// openTurn starts a prompt through g and waits for its first event, so
// the turn is surely in flight.
func openTurn(t *testing.T, g *liveGateway, token, ns, name, text string) (realtimev1.PromptService_PromptClient, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bearer(token), time.Minute)
	stream, err := g.client.Prompt(ctx, &realtimev1.PromptRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: name}, Text: text})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	m, err := stream.Recv()
	if err != nil || m.GetEvent() == nil {
		cancel()
		t.Fatalf("first message %v, %v", m, err)
	}
	return stream, cancel
}

// TestShutdownLetsAStreamInFlightFinish: on SIGTERM the gateway takes no
// new call but a turn already streaming runs to its turn end within the
// grace.
func TestShutdownLetsAStreamInFlightFinish(t *testing.T) {
	ns := env.Namespace(t)
	alice := caller(t, ns, "alice", "create")
	running(t, ns, "chat")
	g := startGateway(t, 30*time.Second)
	// A slow turn: about half a second between its event lines.
	stream, cancel := openTurn(t, g, alice, ns, "chat", "mock:slow take your time")
	defer cancel()
	done := make(chan struct{})
	go func() { g.shutdown(time.Minute); close(done) }()
	time.Sleep(200 * time.Millisecond)
	if _, err := g.prompt(alice, ns, "chat", "a new prompt during shutdown"); status.Code(err) != codes.Unavailable {
		t.Fatalf("a new prompt during shutdown got %v, want Unavailable", err)
	}
	tr, err := readGatewayTurn(t, stream)
	if err != nil || tr.end == nil || tr.end.GetIsError() {
		t.Fatalf("the turn in flight ended %v, %v; want its turn end", tr.end, err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not stop after the last stream ended")
	}
}

// TestShutdownEndsStreamsStillOpenAfterTheGrace: a turn that outlasts the
// shutdown grace ends for its caller with Unavailable "gateway shutting
// down", and the gateway stops.
func TestShutdownEndsStreamsStillOpenAfterTheGrace(t *testing.T) {
	ns := env.Namespace(t)
	alice := caller(t, ns, "alice", "create")
	running(t, ns, "chat")
	g := startGateway(t, time.Second)
	// A turn that never ends by itself.
	stream, cancel := openTurn(t, g, alice, ns, "chat", "mock:hang")
	defer cancel()
	began := time.Now()
	go g.shutdown(time.Minute)
	_, err := readGatewayTurn(t, stream)
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "gateway shutting down") {
		t.Fatalf("the open stream ended with %v, want Unavailable gateway shutting down", err)
	}
	if waited := time.Since(began); waited < 900*time.Millisecond {
		t.Fatalf("the stream was ended after %v, before the 1s grace", waited)
	}
}
