package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// omniaFacade is the `omnia-facade` mode: a stand-in for the Omnia facade
// container of an agent pod (services/omnia-controllers internal/agentruntime
// pod.go). It serves sessions on the facade port (GET /session holds one
// open until the client leaves) and invocations (POST /invoke,
// facade_invoke.go), answers /healthz, /metrics (facade_metrics.go),
// /readyz (ready while
// the runtime at OMNIA_RUNTIME_ADDR accepts connections and no drain has
// begun) and /drain (the preStop hook: it returns once the open sessions
// have ended or OMNIA_DRAIN_TIMEOUT has passed) on the health port, and
// reports the sessions to its AgentRuntime's status (activity.go).
func omniaFacade(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("omnia-facade", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host := fs.String("host", "127.0.0.1", "address both ports listen on; empty for all (a pod network of its own)")
	every := fs.Duration("report-every", 5*time.Second, "shortest time between two activity reports")
	heartbeat := fs.Duration("heartbeat", 30*time.Second, "report again this often while sessions are open")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, err := facadeConfigFromEnv(*host)
	if err != nil {
		fmt.Fprintf(stderr, "mockagent: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var rep reporter
	if sr, err := inClusterReporter(cfg.agent, cfg.namespace, cfg.pod); err != nil {
		// Without an API server (no token mounted) the facade still serves;
		// only the idle deadline goes without reports.
		log.Warn("no activity reports", "err", err)
	} else {
		rep = sr
	}
	f := newFacade(cfg, rep, *every, *heartbeat, log)
	if err := f.serve(ctx); err != nil {
		fmt.Fprintf(stderr, "mockagent: %v\n", err)
		return 1
	}
	return 0
}

// facadeConfig is what the controller tells the facade through its
// environment.
type facadeConfig struct {
	agent, namespace    string
	pod                 string
	sessionAddr, health string
	runtimeAddr         string
	drainTimeout        time.Duration
}

func facadeConfigFromEnv(host string) (facadeConfig, error) {
	c := facadeConfig{agent: os.Getenv("OMNIA_AGENT_NAME"), namespace: os.Getenv("OMNIA_NAMESPACE"), pod: os.Getenv("POD_NAME"),
		runtimeAddr: os.Getenv("OMNIA_RUNTIME_ADDR"), drainTimeout: 30 * time.Second}
	port, health := os.Getenv("OMNIA_FACADE_PORT"), os.Getenv("OMNIA_HEALTH_PORT")
	if port == "" || health == "" || c.runtimeAddr == "" {
		return c, fmt.Errorf("OMNIA_FACADE_PORT, OMNIA_HEALTH_PORT and OMNIA_RUNTIME_ADDR must be set")
	}
	c.sessionAddr, c.health = net.JoinHostPort(host, port), net.JoinHostPort(host, health)
	if v := os.Getenv("OMNIA_DRAIN_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return c, fmt.Errorf("OMNIA_DRAIN_TIMEOUT: %w", err)
		}
		c.drainTimeout = d
	}
	return c, nil
}

// facade counts the open sessions and drains them.
type facade struct {
	cfg    facadeConfig
	log    *slog.Logger
	act    *activity
	met    *facadeMetrics
	client *http.Client

	mu          sync.Mutex
	open        int
	invocations int
	draining    bool
	// idle is closed and replaced whenever open drops to zero.
	idle chan struct{}
}

func newFacade(cfg facadeConfig, rep reporter, every, heartbeat time.Duration, log *slog.Logger) *facade {
	return &facade{cfg: cfg, log: log, act: newActivity(rep, every, heartbeat, time.Now, log),
		met: newFacadeMetrics(cfg.agent, cfg.namespace), client: &http.Client{}, idle: make(chan struct{})}
}

// begin opens a session unless the facade is draining: it is counted in
// the activity reports and the connections gauge until end.
func (f *facade) begin() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.draining {
		return false
	}
	f.open++
	// The gauge first: whoever sees the report then reads the gauge agreeing.
	f.met.connections.Set(float64(f.open))
	f.act.set(f.open)
	return true
}

// end closes a session begun by begin.
func (f *facade) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open--
	f.met.connections.Set(float64(f.open))
	f.act.set(f.open)
	if f.open == 0 {
		close(f.idle)
		f.idle = make(chan struct{})
	}
}

// session holds one session open until the client goes.
func (f *facade) session(w http.ResponseWriter, r *http.Request) {
	if !f.begin() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	defer f.end()
	w.Header().Set("Content-Type", "text/plain")
	_, _ = fmt.Fprintf(w, "session open on %s\n", f.cfg.agent)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	<-r.Context().Done()
}

// drainSessions stops new sessions and waits until the open ones end or
// the drain timeout passes.
func (f *facade) drainSessions(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.draining = true
	open, idle := f.open, f.idle
	f.mu.Unlock()
	if open > 0 {
		t := time.NewTimer(f.cfg.drainTimeout)
		defer t.Stop()
		select {
		case <-idle:
		case <-t.C:
		case <-r.Context().Done():
		}
	}
	f.mu.Lock()
	left := f.open
	f.mu.Unlock()
	_, _ = fmt.Fprintf(w, "drained; %d session(s) left\n", left)
}

func (f *facade) ready(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	draining := f.draining
	f.mu.Unlock()
	if draining {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(r.Context(), "tcp", f.cfg.runtimeAddr)
	if err != nil {
		http.Error(w, "runtime not reachable", http.StatusServiceUnavailable)
		return
	}
	_ = c.Close()
	_, _ = fmt.Fprintln(w, "ok")
}

// serve serves both ports until ctx ends, then sends the last report.
func (f *facade) serve(ctx context.Context) error {
	sessions, health := f.sessionMux(), f.healthMux()
	go f.act.run(ctx)
	errs := make(chan error, 2)
	var srvs []*http.Server
	for _, s := range []struct {
		addr string
		h    http.Handler
	}{{f.cfg.sessionAddr, sessions}, {f.cfg.health, health}} {
		ln, err := listenReusePort(ctx, s.addr)
		if err != nil {
			return fmt.Errorf("facade listen %s: %w", s.addr, err)
		}
		srv := &http.Server{Handler: s.h, ReadHeaderTimeout: 5 * time.Second}
		srvs = append(srvs, srv)
		go func() { errs <- srv.Serve(ln) }()
	}
	f.log.Info("omnia facade stand-in serving", "sessions", f.cfg.sessionAddr, "health", f.cfg.health, "runtime", f.cfg.runtimeAddr)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	f.mu.Lock()
	f.draining = true
	f.mu.Unlock()
	for _, s := range srvs {
		_ = s.Close() // ends the held sessions
	}
	// The pod is going: its last word is that it holds no session.
	f.act.final(shut)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// sessionMux serves the facade port.
func (f *facade) sessionMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /session", f.session)
	// Another method on /invoke is 405, with Allow: POST, by the mux.
	mux.HandleFunc("POST "+invokePath, f.invoke)
	return mux
}

// healthMux serves the health port.
func (f *facade) healthMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", f.ready)
	mux.HandleFunc(drainPath, f.drainSessions)
	mux.Handle("/metrics", f.met.handler())
	return mux
}

// drainPath is the preStop hook's path (internal/agentruntime DrainPath).
const drainPath = "/drain"
