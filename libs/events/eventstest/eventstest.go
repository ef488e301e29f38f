// Package eventstest runs an embedded nats-server with JetStream for tests
// of code that publishes or consumes run events.
package eventstest

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentplane/agentplane/libs/natsauth"
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
	// client are the options Connect starts from: a service credential
	// on a secured server.
	client []nats.Option
}

// Start runs a server on a free localhost port and shuts it down when the
// test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return startWith(t, nil)
}

// StartSecured runs a server as Start does, in operator mode trusting
// only a: a client needs a credential a's Issuer minted. Connect and
// JetStream use a service credential (the account's full rights).
func StartSecured(t testing.TB, a *natsauth.Authority) *Server {
	t.Helper()
	return startSecured(t, a, nil)
}

// startSecured is StartSecured with more server options set by more.
func startSecured(t testing.TB, a *natsauth.Authority, more func(*server.Options)) *Server {
	t.Helper()
	oc, err := jwt.DecodeOperatorClaims(a.OperatorJWT)
	if err != nil {
		t.Fatalf("operator jwt: %v", err)
	}
	res := &server.MemAccResolver{}
	for pub, tok := range map[string]string{a.SystemPublicKey(): a.SystemJWT, a.AccountPublicKey(): a.AccountJWT} {
		if err := res.Store(pub, tok); err != nil {
			t.Fatalf("account jwt: %v", err)
		}
	}
	s := startWith(t, func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{oc}
		o.AccountResolver = res
		o.SystemAccount = a.SystemPublicKey()
		if more != nil {
			more(o)
		}
	})
	creds, err := a.Issuer().ServiceCredentials("eventstest", time.Time{})
	if err != nil {
		t.Fatalf("service creds: %v", err)
	}
	s.client = []nats.Option{nats.UserCredentials(WriteCreds(t, creds))}
	return s
}

// WriteCreds writes a creds file into a test temp dir and returns its
// path.
func WriteCreds(t testing.TB, creds []byte) string {
	t.Helper()
	return WriteFile(t, "user.creds", creds)
}

// WriteFile writes b to a file name in a fresh test temp dir, readable by
// the owner only as a credential must be, and returns its path: what a
// NATS flag (seed, creds, CA file) is pointed at.
func WriteFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ClientOptions are the options Connect starts from (a service
// credential on a secured server, none otherwise).
func (s *Server) ClientOptions() []nats.Option { return append([]nats.Option(nil), s.client...) }

func startWith(t testing.TB, secure func(*server.Options)) *Server {
	t.Helper()
	s := &Server{t: t, opts: server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}}
	if secure != nil {
		secure(&s.opts)
	}
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
	nc, err := nats.Connect(s.URL(), append(s.ClientOptions(), opts...)...)
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
