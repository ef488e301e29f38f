package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is a named health or readiness condition; a nil error passes.
type Check func() error

// HTTPServer serves /metrics on the metrics address and /healthz and
// /readyz on the probe address; one listener serves all three when the
// addresses are equal. Listeners open in Start, so a port already taken
// fails the process at start rather than in the background.
type HTTPServer struct {
	log      *slog.Logger
	gatherer prometheus.Gatherer

	mu      sync.Mutex
	healthz map[string]Check
	readyz  map[string]Check

	servers []*http.Server
	addrs   []net.Addr
}

// NewHTTPServer returns a server exposing gatherer's metrics.
func NewHTTPServer(log *slog.Logger, gatherer prometheus.Gatherer) *HTTPServer {
	return &HTTPServer{log: log, gatherer: gatherer, healthz: map[string]Check{}, readyz: map[string]Check{}}
}

// AddHealthCheck adds a liveness check: /healthz fails while it fails, and
// the kubelet restarts the container.
func (s *HTTPServer) AddHealthCheck(name string, c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.healthz[name] = c
}

// AddReadyCheck adds a readiness check: /readyz fails while it fails, and
// the pod leaves its Service's endpoints.
func (s *HTTPServer) AddReadyCheck(name string, c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readyz[name] = c
}

func (s *HTTPServer) probe(checks map[string]Check) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		names := make([]string, 0, len(checks))
		for n := range checks {
			names = append(names, n)
		}
		sort.Strings(names)
		var failed []string
		for _, n := range names {
			if err := checks[n](); err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", n, err))
			}
		}
		s.mu.Unlock()
		if len(failed) > 0 {
			http.Error(w, strings.Join(failed, "\n"), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}

// Handler returns the mux with all three paths, for tests and for services
// that mount it elsewhere.
func (s *HTTPServer) Handler() http.Handler {
	mux := http.NewServeMux()
	s.route(mux, true, true)
	return mux
}

func (s *HTTPServer) route(mux *http.ServeMux, metrics, probes bool) {
	if metrics {
		mux.Handle("/metrics", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)}))
	}
	if probes {
		mux.HandleFunc("/healthz", s.probe(s.healthz))
		mux.HandleFunc("/readyz", s.probe(s.readyz))
	}
}

// Start opens the listeners for o's addresses ("0" or "" turns one off)
// and serves until Shutdown.
func (s *HTTPServer) Start(o Options) error {
	type bind struct {
		addr            string
		metrics, probes bool
	}
	var binds []bind
	m, h := on(o.MetricsBindAddress), on(o.HealthProbeBindAddress)
	switch {
	case m && h && o.MetricsBindAddress == o.HealthProbeBindAddress:
		binds = append(binds, bind{o.MetricsBindAddress, true, true})
	default:
		if m {
			binds = append(binds, bind{o.MetricsBindAddress, true, false})
		}
		if h {
			binds = append(binds, bind{o.HealthProbeBindAddress, false, true})
		}
	}
	// Bind every address before serving any, so a failed bind only has
	// listeners to close, no server to shut down.
	lns := make([]net.Listener, 0, len(binds))
	for _, b := range binds {
		ln, err := net.Listen("tcp", b.addr)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return fmt.Errorf("listen on %s: %w", b.addr, err)
		}
		lns = append(lns, ln)
	}
	for i, b := range binds {
		ln := lns[i]
		mux := http.NewServeMux()
		s.route(mux, b.metrics, b.probes)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		s.servers = append(s.servers, srv)
		s.addrs = append(s.addrs, ln.Addr())
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("http server failed", "addr", ln.Addr().String(), "err", err)
			}
		}()
	}
	return nil
}

// Addrs are the addresses Start listens on, in the order metrics, probes
// (one when shared); tests bind port 0 and read them here.
func (s *HTTPServer) Addrs() []net.Addr { return append([]net.Addr(nil), s.addrs...) }

// Shutdown stops the listeners, waiting for in-flight scrapes until ctx
// ends.
func (s *HTTPServer) Shutdown(ctx context.Context) {
	for _, srv := range s.servers {
		_ = srv.Shutdown(ctx)
	}
}

// ShutdownWithin is Shutdown with a deadline d from now, for a deferred
// call in main.
//
//nolint:contextcheck // it runs on the way out, after the caller's context is cancelled, so only its own deadline can bound it
func (s *HTTPServer) ShutdownWithin(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	s.Shutdown(ctx)
}

func on(addr string) bool { return addr != "" && addr != "0" }
