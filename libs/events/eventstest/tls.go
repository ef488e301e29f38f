package eventstest

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"k8s.io/client-go/util/cert"

	"github.com/agentplane/agentplane/libs/natsauth"
)

// StartSecuredTLS runs a server as StartSecured does that also requires
// TLS, with a certificate for 127.0.0.1 and localhost issued by a CA of
// its own, whose PEM file it returns. Connect and JetStream trust that CA.
func StartSecuredTLS(t testing.TB, a *natsauth.Authority) (*Server, string) {
	t.Helper()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", nil, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := cert.ParseCertsPEM(certPEM)
	if err != nil || len(certs) != 2 {
		t.Fatalf("generated certificates: %d, %v", len(certs), err)
	}
	caPEM, err := cert.EncodeCertificates(certs[1])
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSecured(t, a, func(o *server.Options) {
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		o.TLSTimeout = 5
	})
	s.client = append(s.client, nats.RootCAs(caFile))
	return s, caFile
}
