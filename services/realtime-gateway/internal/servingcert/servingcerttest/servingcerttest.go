// Package servingcerttest issues serving certificates for tests and
// rotates them the way the kubelet updates a mounted Secret: each version
// in a new hidden directory, published by swapping the `..data` symlink
// the visible files point through, the old version then removed.
package servingcerttest

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/testcerts"
)

// Pair is a serving certificate for 127.0.0.1 and localhost, issued by a
// CA of its own.
type Pair = testcerts.Pair

// NewPair issues a Pair from a new CA.
func NewPair(t testing.TB) Pair {
	t.Helper()
	return testcerts.Must(t)
}

// Volume is a directory laid out as the kubelet lays out a Secret volume
// holding tls.crt and tls.key.
type Volume struct {
	// Dir is the mount point.
	Dir     string
	t       testing.TB
	version int
	current string
}

// NewVolume writes p into a new Volume.
func NewVolume(t testing.TB, p Pair) *Volume {
	t.Helper()
	v := &Volume{Dir: t.TempDir(), t: t}
	v.Put(p)
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(v.Dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// CertFile is the certificate's path, through the symlinks.
func (v *Volume) CertFile() string { return filepath.Join(v.Dir, "tls.crt") }

// KeyFile is the private key's path, through the symlinks.
func (v *Volume) KeyFile() string { return filepath.Join(v.Dir, "tls.key") }

// Put publishes p as the volume's new content, atomically.
func (v *Volume) Put(p Pair) {
	v.t.Helper()
	v.version++
	ts := "..v" + strconv.Itoa(v.version)
	dir := filepath.Join(v.Dir, ts)
	if err := os.Mkdir(dir, 0o755); err != nil {
		v.t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": p.CertPEM, "tls.key": p.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			v.t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.Dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.Dir, "..data")); err != nil {
		v.t.Fatal(err)
	}
	if v.current != "" {
		if err := os.RemoveAll(filepath.Join(v.Dir, v.current)); err != nil {
			v.t.Fatal(err)
		}
	}
	v.current = ts
}

// Presented dials addr with TLS, trusting nothing, and returns the leaf
// certificate the server presents (nil when the handshake fails).
func Presented(addr string) *x509.Certificate {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // reads the certificate, sends nothing
	if err != nil {
		return nil
	}
	defer func() { _ = conn.Close() }()
	if certs := conn.ConnectionState().PeerCertificates; len(certs) > 0 {
		return certs[0]
	}
	return nil
}
