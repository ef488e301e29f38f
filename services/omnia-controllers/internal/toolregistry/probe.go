package toolregistry

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// maxProbesInFlight bounds concurrent dials per registry.
const maxProbesInFlight = 8

// Probeable reports whether an endpoint is a network address: client,
// stdio and platform tools have nothing to dial.
func Probeable(endpoint string) bool {
	if endpoint == "" {
		return false
	}
	for _, p := range []string{"client://", "stdio://", "platform://"} {
		if strings.HasPrefix(endpoint, p) {
			return false
		}
	}
	return true
}

// DialAddress turns an endpoint into host:port: a URL's host with its port
// or the scheme's default (443 for https and grpcs, else 80), or a bare
// host:port.
func DialAddress(endpoint string) (string, error) {
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		if u.Port() != "" {
			return u.Host, nil
		}
		port := "80"
		if u.Scheme == "https" || u.Scheme == "grpcs" || u.Scheme == "wss" {
			port = "443"
		}
		return net.JoinHostPort(u.Hostname(), port), nil
	}
	if host, port, err := net.SplitHostPort(endpoint); err == nil && host != "" && port != "" {
		return endpoint, nil
	}
	return "", fmt.Errorf("unrecognized endpoint address %q", endpoint)
}

// Prober checks endpoints; the result maps each endpoint to its failure
// (nil when reachable).
type Prober interface {
	Probe(ctx context.Context, endpoints []string, timeout time.Duration) map[string]error
}

// TCPProber dials each endpoint once: reachable means a TCP connection
// could be opened, nothing more.
type TCPProber struct{}

// Probe dials the endpoints concurrently, at most maxProbesInFlight at once.
func (TCPProber) Probe(ctx context.Context, endpoints []string, timeout time.Duration) map[string]error {
	out := make(map[string]error, len(endpoints))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxProbesInFlight)
	for _, e := range endpoints {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := dial(ctx, e, timeout)
			mu.Lock()
			out[e] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func dial(ctx context.Context, endpoint string, timeout time.Duration) error {
	addr, err := DialAddress(endpoint)
	if err != nil {
		return err
	}
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}
