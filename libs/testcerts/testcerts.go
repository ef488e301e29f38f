// Package testcerts issues serving certificates for 127.0.0.1 and
// localhost from a throw-away CA, for tests and the local stack that run
// TLS servers on loopback (NATS, realtime-gateway, fakes of either).
package testcerts

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/util/cert"
)

// Pair is a serving certificate and the CA that issued it.
type Pair struct {
	// CertPEM holds the certificate then its CA, as cert-manager's tls.crt
	// may; KeyPEM its private key.
	CertPEM, KeyPEM []byte
	// CA is the pool a client trusting only this pair's CA uses; CAPEM the
	// same as PEM (a --ca-file).
	CA    *x509.CertPool
	CAPEM []byte
	// Leaf is the certificate itself.
	Leaf *x509.Certificate
	// TLS is the certificate as a server presents it.
	TLS tls.Certificate
}

// New issues a Pair from a new CA.
func New() (Pair, error) {
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", nil, []string{"localhost"})
	if err != nil {
		return Pair{}, err
	}
	certs, err := cert.ParseCertsPEM(certPEM)
	if err != nil {
		return Pair{}, err
	}
	if len(certs) != 2 {
		return Pair{}, fmt.Errorf("%d certificates generated, want the leaf and its CA", len(certs))
	}
	caPEM, err := cert.EncodeCertificates(certs[1])
	if err != nil {
		return Pair{}, err
	}
	served, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return Pair{}, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(certs[1])
	return Pair{CertPEM: certPEM, KeyPEM: keyPEM, CA: pool, CAPEM: caPEM, Leaf: certs[0], TLS: served}, nil
}

// Must is New for a test, which it fails on error.
func Must(t testing.TB) Pair {
	t.Helper()
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// WriteCA writes p's CA as PEM into dir and returns the file's path.
func (p Pair) WriteCA(dir string) (string, error) {
	f := filepath.Join(dir, "ca.crt")
	return f, os.WriteFile(f, p.CAPEM, 0o600)
}

// MustWriteCA writes p's CA into a test temp dir and returns its path.
func (p Pair) MustWriteCA(t testing.TB) string {
	t.Helper()
	f, err := p.WriteCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return f
}
