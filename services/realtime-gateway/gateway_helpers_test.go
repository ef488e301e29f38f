package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/agentplane/agentplane/libs/turntest"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/app"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/config"
)

// liveGateway is one in-process gateway serving on loopback.
type liveGateway struct {
	t      *testing.T
	app    *app.App
	addr   string
	stop   context.CancelFunc
	served chan error
	client realtimev1.PromptServiceClient
	once   sync.Once
}

// startGateway runs a gateway as the platform's ServiceAccount with the
// given shutdown timeout; the test's end stops it.
func startGateway(t *testing.T, shutdownTimeout time.Duration) *liveGateway {
	t.Helper()
	return startGatewayWith(t, shutdownTimeout)
}

// startGatewayWith is startGateway with more flags; its client is
// plaintext, so a gateway serving TLS needs one of its own.
func startGatewayWith(t *testing.T, shutdownTimeout time.Duration, flags ...string) *liveGateway {
	t.Helper()
	rc := platform(t)
	cfg, err := config.Parse(append([]string{"--shutdown-timeout=" + shutdownTimeout.String(), "--key-secret-namespace=" + gwNamespace,
		"--dial-timeout=3s", "--grpc-bind-address=127.0.0.1:0", "--metrics-bind-address=127.0.0.1:0",
		"--health-probe-bind-address=127.0.0.1:0"}, flags...), func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	watchCtx, cancelWatch := context.WithCancel(context.Background())
	t.Cleanup(cancelWatch)
	tw := &testWriter{t: t}
	t.Cleanup(tw.close)
	log := slog.New(slog.NewJSONHandler(tw, nil))
	a, err := app.New(watchCtx, cfg, rc, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	if err := a.Listen(ctx); err != nil {
		stop()
		t.Fatal(err)
	}
	g := &liveGateway{t: t, app: a, addr: a.GRPCAddr().String(), stop: stop, served: make(chan error, 1)}
	go func() { g.served <- a.Serve(ctx) }()
	t.Cleanup(func() { g.shutdown(time.Minute) })
	deadline := time.Now().Add(30 * time.Second)
	for !a.Ready(context.Background()) {
		if time.Now().After(deadline) {
			t.Fatal("gateway not ready after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn, err := grpc.NewClient(g.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	g.client = realtimev1.NewPromptServiceClient(conn)
	return g
}

// shutdown stops the gateway as SIGTERM would and waits for Serve to
// return.
func (g *liveGateway) shutdown(within time.Duration) {
	g.once.Do(func() {
		g.stop()
		select {
		case err := <-g.served:
			if err != nil {
				g.t.Errorf("gateway: %v", err)
			}
		case <-time.After(within):
			g.t.Fatalf("gateway still serving %v after shutdown began", within)
		}
	})
}

// testWriter sends the gateway's log lines to the test log until the
// test ends; later lines (from watches winding down) are dropped.
type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// bearer attaches a caller's token to ctx ("" attaches nothing).
func bearer(token string) context.Context {
	if token == "" {
		return context.Background()
	}
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
}

// gwTurn is what a Prompt through the gateway streamed back.
type gwTurn struct {
	events []*eventsv1.RunEvent
	end    *realtimev1.TurnEnd
}

// prompt sends text to Agent ns/name as the caller of token and reads the
// whole turn; the error is the stream's status.
func (g *liveGateway) prompt(token, ns, name, text string) (gwTurn, error) {
	ctx, cancel := context.WithTimeout(bearer(token), time.Minute)
	defer cancel()
	stream, err := g.client.Prompt(ctx, &realtimev1.PromptRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: name}, Text: text})
	if err != nil {
		return gwTurn{}, err
	}
	return readGatewayTurn(g.t, stream)
}

// readGatewayTurn reads a turn's stream, checking that exactly one
// TurnEnd comes and comes last.
func readGatewayTurn(t *testing.T, stream grpc.ServerStreamingClient[realtimev1.PromptResponse]) (gwTurn, error) {
	t.Helper()
	events, end, err := turntest.Read(t, stream)
	return gwTurn{events: events, end: end}, err
}

// metadataFrom attaches a caller's token to ctx.
func metadataFrom(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}
