// Package eventstest runs an embedded nats-server with JetStream for tests
// of code that publishes or consumes run events.
package eventstest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startTimeout bounds how long a test waits for the server to accept
// connections; it is a safety net, not an expectation.
const startTimeout = 30 * time.Second

// Server is an embedded nats-server with JetStream whose store lives in a
// test temp dir. It can be stopped and restarted on the same port and
// store, to test what happens to clients while NATS is away.
type Server struct {
	t    testing.TB
	opts server.Options
	srv  *server.Server
}

// Start runs a server on a free localhost port and shuts it down when the
// test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, opts: server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}}
	s.start()
	// Pin the port the first start picked, so a restart reuses it and
	// clients reconnect to the same URL.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatalf("nats-server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(startTimeout) {
		s.t.Fatalf("nats-server not ready")
	}
	s.srv = srv
}

// URL is the client URL, stable across restarts.
func (s *Server) URL() string { return s.srv.ClientURL() }

// Stop shuts the server down; stored messages stay in the store dir.
func (s *Server) Stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
	}
}

// Restart starts the server again on the same port and store dir after
// Stop.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Connect returns a client connection closed when the test ends.
func (s *Server) Connect(opts ...nats.Option) *nats.Conn {
	s.t.Helper()
	nc, err := nats.Connect(s.URL(), opts...)
	if err != nil {
		s.t.Fatalf("connect: %v", err)
	}
	s.t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a fresh connection.
func (s *Server) JetStream() jetstream.JetStream {
	s.t.Helper()
	js, err := jetstream.New(s.Connect())
	if err != nil {
		s.t.Fatalf("jetstream: %v", err)
	}
	return js
}
