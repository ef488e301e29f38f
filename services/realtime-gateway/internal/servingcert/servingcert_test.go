package servingcert

import (
	"crypto/tls"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentplane/agentplane/services/realtime-gateway/internal/servingcert/servingcerttest"
)

// serve accepts TLS connections on loopback with cfg and completes their
// handshakes until the test ends.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				_ = c.Close()
			}()
		}
	}()
	return l.Addr().String()
}

// trusts reports whether a client trusting only p's CA completes a
// handshake with addr.
func trusts(addr string, p servingcerttest.Pair) bool {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: p.CA, ServerName: "localhost"})
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// TestARotatedCertificateIsServedWithoutARestart: the kubelet swaps the
// Secret volume's content; the next handshakes present the new pair, and
// a rewrite that is not a usable pair leaves the last good one in use.
func TestARotatedCertificateIsServedWithoutARestart(t *testing.T) {
	first, second := servingcerttest.NewPair(t), servingcerttest.NewPair(t)
	vol := servingcerttest.NewVolume(t, first)
	cfg, err := Watch(t.Context(), vol.CertFile(), vol.KeyFile(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg)
	if !trusts(addr, first) {
		t.Fatal("the first certificate is not served")
	}
	vol.Put(second)
	deadline := time.Now().Add(30 * time.Second)
	for !trusts(addr, second) {
		if time.Now().After(deadline) {
			t.Fatalf("still serving serial %v 30s after the rotation", servingcerttest.Presented(addr).SerialNumber)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if trusts(addr, first) {
		t.Fatal("the replaced certificate is still served")
	}

	// Half a rotation (a key that does not match) is not served.
	vol.Put(servingcerttest.Pair{CertPEM: first.CertPEM, KeyPEM: second.KeyPEM})
	time.Sleep(time.Second)
	if !trusts(addr, second) {
		t.Fatal("a mismatched pair replaced the good one")
	}
}

// TestAnUnusablePairIsRefusedAtStart: a missing file or a key that is not
// the certificate's stops the gateway at start rather than serving
// nothing.
func TestAnUnusablePairIsRefusedAtStart(t *testing.T) {
	a, b := servingcerttest.NewPair(t), servingcerttest.NewPair(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	crt, key, otherKey := write("a.crt", a.CertPEM), write("a.key", a.KeyPEM), write("b.key", b.KeyPEM)
	for _, tc := range []struct{ name, cert, key string }{
		{"a missing certificate is refused", filepath.Join(dir, "none.crt"), key},
		{"a key of another certificate is refused", crt, otherKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Watch(t.Context(), tc.cert, tc.key, slog.New(slog.DiscardHandler)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := Watch(t.Context(), crt, key, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("a good pair: %v", err)
	}
}
