package activator

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestServerServesUntilCancelled: the Runnable needs no lead, serves its
// handler on its listener, and returns nil once its context ends.
func TestServerServesUntilCancelled(t *testing.T) {
	addrs := make(chan net.Addr, 1)
	s := &Server{Addr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second, Listening: func(a net.Addr) { addrs <- a },
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "activator") })}
	if s.NeedLeaderElection() {
		t.Error("the activator waits for the lead; every replica must serve")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	var addr net.Addr
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("Start: %v", err)
	}
	resp, err := http.Get("http://" + addr.String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(b) != "activator" {
		t.Errorf("answered %q", b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start after cancel: %v", err)
	}
}

// TestServerListenFailure: an address it cannot bind is an error.
func TestServerListenFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	s := &Server{Addr: ln.Addr().String(), Handler: http.NotFoundHandler()}
	if err := s.Start(context.Background()); err == nil {
		t.Error("Start on a bound address returned nil")
	}
}
