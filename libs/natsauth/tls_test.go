package natsauth_test

import (
	"bufio"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/testcerts"
)

// TestTLSServerIsReachedOnlyThroughItsCA: against a server that requires
// TLS, a client with --nats-ca-file of the server's CA publishes, and
// every client that would talk to another server (or to none over TLS)
// is refused before its credential is sent.
func TestTLSServerIsReachedOnlyThroughItsCA(t *testing.T) {
	a, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	srv, caFile := eventstest.StartSecuredTLS(t, a)
	creds := eventstest.WriteCreds(t, mustRunCreds(t, a.Issuer()))

	t.Run("a client with the server's CA connects over TLS and publishes", func(t *testing.T) {
		c := natsauth.Client{CredsFile: creds, CAFile: caFile, InboxPrefix: natsauth.InboxPrefix(victim.UID)}
		nc, err := nats.Connect(srv.URL(), c.Options()...)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer nc.Close()
		if _, err := nc.TLSConnectionState(); err != nil {
			t.Fatalf("the connection is not TLS: %v", err)
		}
		if err := nc.Publish(strings.TrimSuffix(victim.EventSubjects(), ">")+"message", []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if err := nc.FlushTimeout(generous); err != nil {
			t.Fatal(err)
		}
	})
	for _, tc := range []struct {
		rule   string
		client natsauth.Client
	}{
		{"a client without the CA does not trust the server", natsauth.Client{CredsFile: creds}},
		{"a client with another CA does not trust the server", natsauth.Client{CredsFile: creds, CAFile: testcerts.Must(t).MustWriteCA(t)}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			nc, err := nats.Connect(srv.URL(), tc.client.Options()...)
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), "certificate signed by unknown authority") {
				t.Fatalf("refused with %v, want the handshake's unknown-authority error", err)
			}
		})
	}
	t.Run("a plaintext client is never served", func(t *testing.T) {
		u, err := url.Parse(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.DialTimeout("tcp", u.Host, generous)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		_ = conn.SetDeadline(time.Now().Add(generous))
		r := bufio.NewReader(conn)
		info, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(info, `"tls_required":true`) {
			t.Fatalf("INFO does not require TLS: %s", info)
		}
		if _, err := conn.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n")); err != nil {
			t.Fatal(err)
		}
		// The server expects a TLS handshake and drops the connection; it
		// never answers the plaintext PING.
		for {
			line, err := r.ReadString('\n')
			if strings.HasPrefix(line, "PONG") {
				t.Fatal("the server answered a plaintext client")
			}
			if err != nil {
				return
			}
		}
	})
}

func mustRunCreds(t *testing.T, iss *natsauth.Issuer) []byte {
	t.Helper()
	creds, err := iss.RunCredentials(victim, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return creds
}
