package eventstest

import (
	"crypto/tls"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/testcerts"
)

// StartSecuredTLS runs a server as StartSecured does that also requires
// TLS, with a certificate for 127.0.0.1 and localhost issued by a CA of
// its own, whose PEM file it returns. Connect and JetStream trust that CA.
func StartSecuredTLS(t testing.TB, a *natsauth.Authority) (*Server, string) {
	t.Helper()
	p := testcerts.Must(t)
	caFile := p.MustWriteCA(t)
	s := startSecured(t, a, func(o *server.Options) {
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{p.TLS}, MinVersion: tls.VersionTLS12}
		o.TLSTimeout = 5
	})
	s.client = append(s.client, nats.RootCAs(caFile))
	return s, caFile
}
