package activator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Server runs the activator's listener as a manager Runnable. It runs on
// every replica, leader or not: the EndpointSlices name the leader's
// address, and a replica that lost the lead still answers the requests
// that reach it until the slices name the new one.
type Server struct {
	// Addr is the listen address (":8082").
	Addr string
	// Handler serves the requests.
	Handler http.Handler
	// ShutdownTimeout bounds the drain of open requests at the end.
	ShutdownTimeout time.Duration
	// Listening, when not nil, receives the bound address once the
	// listener is open (tests bind port 0).
	Listening func(net.Addr)
}

// NeedLeaderElection is false: every replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then shuts down within ShutdownTimeout.
func (s *Server) Start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("activator listen on %s: %w", s.Addr, err)
	}
	if s.Listening != nil {
		s.Listening(ln.Addr())
	}
	// No write timeout: a proxied WebSocket lives as long as its session.
	srv := &http.Server{Handler: s.Handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("activator: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("activator shutdown: %w", err)
	}
	return nil
}
