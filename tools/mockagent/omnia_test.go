package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestOmniaRuntimeAnswersTheProbes: the Omnia runtime stand-in answers
// the agent pod's readiness and liveness paths with its pack version, and
// two of them (the stable and the candidate pod on one host network) share
// the one port.
func TestOmniaRuntimeAnswersTheProbes(t *testing.T) {
	t.Setenv("OMNIA_PROMPTPACK_VERSION", "1.2.0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	_ = free.Close()
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- serveOmniaRuntime(ctx, addr, slog.New(slog.DiscardHandler)) }()
	}
	cases := []struct{ rule, path string }{
		{"the readiness path answers with the pack version", "/readyz"},
		{"the liveness path answers with the pack version", "/healthz"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			body := get(t, "http://"+addr+c.path, errs)
			if !strings.Contains(body, "pack version 1.2.0") {
				t.Errorf("%s answered %q, want the pack version", c.path, body)
			}
		})
	}
	cancel()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("a runtime sharing the port failed: %v", err)
		}
	}
}

// get fetches url, retrying while the servers start; a server that ends
// first fails the test with its error.
func get(t *testing.T, url string, errs chan error) string {
	t.Helper()
	for i := 0; ; i++ {
		select {
		case err := <-errs:
			t.Fatalf("a runtime ended: %v", err)
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			defer func() { _ = resp.Body.Close() }()
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: HTTP %d", url, resp.StatusCode)
			}
			return b.String()
		}
		if i == 100 {
			t.Fatalf("%s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOmniaRuntimeRefusesUnknownFlags: a mistyped runtime.command fails
// the container at once instead of serving on a default address.
func TestOmniaRuntimeRefusesUnknownFlags(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"mockagent", "omnia-runtime", "--adr=:8081"}, io.Discard, &stderr); code != 2 {
		t.Fatalf("exit %d, want 2 (stderr %q)", code, stderr.String())
	}
}
