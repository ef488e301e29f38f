package provider

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ErrProbeRefused wraps every reason the credential probe is not sent.
var ErrProbeRefused = fmt.Errorf("credential probe refused")

// checkProbeURL says whether the credential probe may send a key to raw.
// The probe carries the key of a Secret to an address the Provider's
// author chose, so it goes only over https, where the address's
// certificate proves who receives the key. Plain http is allowed only
// when allowHTTP is set (a flag of the binary) and only to a loopback
// address or a cluster-local name: in-cluster model servers and tests.
func checkProbeURL(raw string, allowHTTP bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: %q is not an absolute URL", ErrProbeRefused, raw)
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return nil
	case "http":
		if !allowHTTP {
			return fmt.Errorf("%w: the key is sent only over https, and %s is plain http", ErrProbeRefused, u.Host)
		}
		if !localHost(u.Hostname()) {
			return fmt.Errorf("%w: plain http is allowed only to loopback or cluster-local hosts, not %s", ErrProbeRefused, u.Hostname())
		}
		return nil
	}
	return fmt.Errorf("%w: scheme %q is not https", ErrProbeRefused, u.Scheme)
}

// localHost reports whether host is a loopback address, localhost, or a
// Kubernetes cluster-local Service name (<svc>.<ns>.svc[.cluster.local]).
func localHost(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	return h == "localhost" || strings.HasSuffix(h, ".localhost") ||
		strings.HasSuffix(h, ".svc") || strings.HasSuffix(h, ".svc.cluster.local")
}
