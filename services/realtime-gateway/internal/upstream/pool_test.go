package upstream

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
)

func serve(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	supervisorv1.RegisterSessionServiceServer(srv, supervisorv1.UnimplementedSessionServiceServer{})
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}

// TestPoolSharesOneConnectionPerAddress checks reuse, the dial
// observation of new connections only, and the idle close.
func TestPoolSharesOneConnectionPerAddress(t *testing.T) {
	a, b := serve(t), serve(t)
	dials := 0
	p := New(Options{DialTimeout: 5 * time.Second, IdleTimeout: 200 * time.Millisecond, ObserveDial: func(time.Duration) { dials++ }})
	defer p.Close()
	ctx := context.Background()
	var releases []func()
	for _, addr := range []string{a, a, b, a} {
		_, release, err := p.Get(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	if p.Len() != 2 || dials != 2 {
		t.Fatalf("%d connections, %d dials for two addresses; want 2 and 2", p.Len(), dials)
	}
	time.Sleep(400 * time.Millisecond)
	if p.Len() != 2 {
		t.Fatal("a connection in use was closed as idle")
	}
	for _, r := range releases {
		r()
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle connections still open", p.Len())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPoolFailsFastOnAnUnreachablePod checks that a refused connection is
// an error at the first failed attempt, well inside the dial timeout, and
// that the failed connection is not kept.
func TestPoolFailsFastOnAnUnreachablePod(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	p := New(Options{DialTimeout: time.Minute, IdleTimeout: time.Minute})
	defer p.Close()
	began := time.Now()
	if _, _, err := p.Get(context.Background(), addr); err == nil {
		t.Fatal("got a client of a closed port")
	}
	if waited := time.Since(began); waited > 30*time.Second {
		t.Fatalf("waited %v for a refused connection", waited)
	}
	// The next Get replaces the failed connection rather than reuse it.
	if _, _, err := p.Get(context.Background(), addr); err == nil || p.Len() != 1 {
		t.Fatalf("second Get: %v with %d connections", err, p.Len())
	}
}
