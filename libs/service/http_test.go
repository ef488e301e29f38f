package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHTTPServerServesMetricsAndProbes(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := RegisterBuildInfo(reg, "svc"); err != nil {
		t.Fatal(err)
	}
	s := NewHTTPServer(slog.New(slog.DiscardHandler), reg)
	notReady := errors.New("cache not synced")
	s.AddReadyCheck("cache", func() error { return notReady })
	s.AddHealthCheck("loop", func() error { return nil })
	if err := s.Start(Options{MetricsBindAddress: "127.0.0.1:0", HealthProbeBindAddress: "127.0.0.2:0"}); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	addrs := s.Addrs()
	if len(addrs) != 2 {
		t.Fatalf("two addresses give two listeners, got %v", addrs)
	}
	metrics, probes := "http://"+addrs[0].String(), "http://"+addrs[1].String()

	if code, body := get(t, metrics+"/metrics"); code != 200 || !strings.Contains(body, `agentplane_build_info{goversion="go`) || !strings.Contains(body, `service="svc"`) {
		t.Fatalf("metrics: %d %s", code, body)
	}
	if code, _ := get(t, metrics+"/healthz"); code != 404 {
		t.Fatalf("the metrics listener serves no probes, got %d", code)
	}
	if code, _ := get(t, probes+"/healthz"); code != 200 {
		t.Fatalf("healthz: %d", code)
	}
	if code, body := get(t, probes+"/readyz"); code != 503 || !strings.Contains(body, "cache: cache not synced") {
		t.Fatalf("a failing ready check fails /readyz with its reason, got %d %q", code, body)
	}
	notReady = nil
	if code, _ := get(t, probes+"/readyz"); code != 200 {
		t.Fatalf("readyz after the check passes: %d", code)
	}
}

func TestHTTPServerSharesOneListenerForOneAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	s := NewHTTPServer(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err := s.Start(Options{MetricsBindAddress: addr, HealthProbeBindAddress: addr}); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	if len(s.Addrs()) != 1 {
		t.Fatalf("got %v", s.Addrs())
	}
	for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
		if code, _ := get(t, "http://"+addr+p); code != 200 {
			t.Fatalf("%s: %d", p, code)
		}
	}
	s.ShutdownWithin(time.Second)
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		_ = resp.Body.Close()
		t.Fatal("the listener still answers after ShutdownWithin")
	}
}

func TestHTTPServerFailsAtStartOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	s := NewHTTPServer(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err := s.Start(Options{MetricsBindAddress: ln.Addr().String(), HealthProbeBindAddress: "0"}); err == nil {
		t.Fatal("a taken port must fail Start")
	}
}

// A failed second bind must release the first address, so a restart can
// take it.
func TestHTTPServerReleasesTheFirstPortWhenTheSecondIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	_ = free.Close()
	s := NewHTTPServer(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err := s.Start(Options{MetricsBindAddress: addr, HealthProbeBindAddress: taken.Addr().String()}); err == nil {
		t.Fatal("a taken probe port must fail Start")
	}
	again, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the metrics address is still held after the failed Start: %v", err)
	}
	_ = again.Close()
}

func TestHTTPServerOffWithZero(t *testing.T) {
	s := NewHTTPServer(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err := s.Start(Options{MetricsBindAddress: "0", HealthProbeBindAddress: "0"}); err != nil {
		t.Fatal(err)
	}
	if len(s.Addrs()) != 0 {
		t.Fatalf("0 turns both off, got %v", s.Addrs())
	}
}
