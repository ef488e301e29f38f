package image

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// MozillaBundle returns the NSS (Mozilla) root certificates that the Go
// module golang.org/x/crypto/x509roots/fallback embeds, as a PEM bundle.
// Taking them from a module pinned in go.sum, not from the build machine's
// /etc/ssl, is what makes the bundle (and so the digest) the same on every
// machine for a given commit.
//
// Roots that NSS trusts only for certificates issued before a date are left
// out: a PEM file cannot carry that limit, and trusting them without it
// would trust more than Mozilla does. It also returns how many were left out.
func MozillaBundle() (pemBundle []byte, skipped int) {
	var buf bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			skipped++
			continue
		}
		// Encode cannot fail on a bytes.Buffer with a valid block.
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
	}
	return buf.Bytes(), skipped
}

// ParseBundle checks that b is a PEM bundle of certificates only, and
// returns them: a CA file holding anything else (a key, a typo, an HTML
// error page) must fail the build rather than TLS in production.
func ParseBundle(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := b
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("CA bundle: block %d is a %q, not a CERTIFICATE", len(certs)+1, block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CA bundle: certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("CA bundle: %d bytes after certificate %d are not PEM", len(bytes.TrimSpace(rest)), len(certs))
	}
	if len(certs) == 0 {
		return nil, errors.New("CA bundle: no certificate")
	}
	return certs, nil
}
