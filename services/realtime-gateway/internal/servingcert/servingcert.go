// Package servingcert serves the gRPC port's TLS certificate from a pair
// of PEM files and follows them: when the kubelet rewrites the mounted
// Secret (cert-manager renewing it, an operator replacing it), the next
// TLS handshake presents the new pair, with no restart. It wraps
// controller-runtime's certwatcher, which watches the files (fsnotify,
// re-added across the kubelet's symlink swap) and also reads them every
// ten seconds in case an event is missed.
package servingcert

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// Watch reads the pair certFile, keyFile and keeps following it until ctx
// ends; the returned config always presents the latest good pair. A pair
// that cannot be read or does not match is an error now; later, a bad
// rewrite leaves the previous pair in use (certwatcher logs why). Each
// certificate loaded is logged with its names and expiry, never the key.
func Watch(ctx context.Context, certFile, keyFile string, log *slog.Logger) (*tls.Config, error) {
	cw, err := certwatcher.New(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s / key %s: %w", certFile, keyFile, err)
	}
	cw.RegisterCallback(func(c tls.Certificate) { logLoaded(log, certFile, c) })
	go func() {
		if err := cw.Start(ctx); err != nil {
			log.Error("TLS certificate watch stopped; the certificate loaded last stays in use", "file", certFile, "err", err)
		}
	}()
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cw.GetCertificate}, nil
}

// logLoaded notes the certificate now served.
func logLoaded(log *slog.Logger, file string, c tls.Certificate) {
	if c.Leaf == nil {
		log.Info("TLS certificate loaded", "file", file)
		return
	}
	log.Info("TLS certificate loaded", "file", file, "subject", c.Leaf.Subject.String(),
		"dnsNames", strings.Join(c.Leaf.DNSNames, ","), "serial", c.Leaf.SerialNumber.String(),
		"notAfter", c.Leaf.NotAfter.UTC().Format("2006-01-02T15:04:05Z"))
}
