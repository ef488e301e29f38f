// Package activator wakes an AgentRuntime that its idle deadline scaled
// to zero when a session arrives for it (docs/omnia-controllers.md,
// "Waking on the next session"). While the agent is reaped, the
// AgentRuntime controller routes its Service here; for each request the
// activator finds the agent the Host names, sets its wake annotation
// once per wake, waits for one of its pods to be Ready and proxies the
// request (a WebSocket upgrade included) to that pod.
package activator

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Defaults of the Handler's settings.
const (
	// DefaultTimeout bounds the wait for a Ready pod (--activator-timeout).
	DefaultTimeout = 2 * time.Minute
	// DefaultPoll is how often a waiting request looks for a Ready pod.
	DefaultPoll = 250 * time.Millisecond
	// DefaultGrace is how long an agent this activator woke stays
	// servable after its Service is routed back to its pods.
	DefaultGrace = 2 * time.Minute
	// retryAfter is the Retry-After of a request that waited in vain, in
	// seconds.
	retryAfter = "10"
)

// Agent is what the activator knows of the agent behind a Service.
type Agent struct {
	// Namespace and Name name the AgentRuntime.
	Namespace, Name string
	// Routed says the agent's Service is routed to the activator now;
	// the activator serves no other agent, so it never proxies to one
	// that is up (it is no open proxy).
	Routed bool
	// NeedsWake says the wake annotation must be set for the agent to
	// wake; false once a wake is pending.
	NeedsWake bool
	// Ports maps each Service port to the pod port it targets.
	Ports map[int32]int32
}

// Backend is what the activator reads and writes: the cluster
// (kube.go), or a fake in tests.
type Backend interface {
	// Agent returns the agent whose Service is ns/svc; nil when there is
	// none.
	Agent(ctx context.Context, ns, svc string) (*Agent, error)
	// Wake sets the agent's wake annotation to at.
	Wake(ctx context.Context, ns, name string, at time.Time) error
	// ReadyPod returns the IP of a Ready pod of the agent; "" when none.
	ReadyPod(ctx context.Context, ns, name string) (string, error)
}

// Handler is the activator's HTTP handler.
type Handler struct {
	// Backend finds, wakes and waits on agents.
	Backend Backend
	// Timeout bounds the wait for a Ready pod; DefaultTimeout when 0.
	Timeout time.Duration
	// Poll is how often the wait looks for a Ready pod; DefaultPoll when 0.
	Poll time.Duration
	// ClusterDomain is the cluster's DNS domain; DefaultClusterDomain
	// when empty.
	ClusterDomain string
	// Transport carries proxied requests; http.DefaultTransport when nil.
	Transport http.RoundTripper
	// Now is the clock of the wake annotation and of Grace; time.Now
	// when nil.
	Now func() time.Time
	// Log records failures; it never gets a header or a body.
	Log logr.Logger
	// Grace is how long after a proxied request the agent stays servable
	// once its Service is no longer routed here; DefaultGrace when 0.
	// Clients' kept-alive connections to the activator outlive the
	// routing (connection tracking keeps them on the old endpoint), so
	// their next requests still arrive here: they are served with
	// Connection: close, and the client's next connection goes to the
	// pod.
	Grace time.Duration

	// served is when each agent's request was last proxied, for Grace.
	served map[string]time.Time

	mu sync.Mutex
	// flights are the waits in progress, one per agent: every request for
	// an agent that has no Ready pod joins its one wait, so N requests
	// make one wake write.
	flights map[string]*flight
}

// flight is one wait for an agent's Ready pod.
type flight struct {
	done chan struct{}
	// ip and err are set before done is closed.
	ip  string
	err error
}

// errTimeout is a wait that found no Ready pod in time.
var errTimeout = errors.New("no Ready pod in time")

// ServeHTTP serves one request: refused unless its Host names an agent
// routed here and a port of its Service; otherwise woken, awaited and
// proxied.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, err := ParseHost(r.Host, h.ClusterDomain)
	if err != nil {
		http.Error(w, "unknown host", http.StatusNotFound)
		return
	}
	ctx := r.Context()
	ag, err := h.Backend.Agent(ctx, t.Namespace, t.Service)
	switch {
	case err != nil:
		h.Log.Error(err, "cannot read the agent", "namespace", t.Namespace, "service", t.Service)
		w.Header().Set("Retry-After", retryAfter)
		http.Error(w, "cannot read the agent", http.StatusServiceUnavailable)
		return
	case ag == nil:
		http.Error(w, "unknown host", http.StatusNotFound)
		return
	case !ag.Routed && !h.recentlyServed(ag):
		// The agent is up, or its Service is not the activator's: the
		// client must reach it through its Service.
		http.Error(w, "the agent is not served by the activator", http.StatusMisdirectedRequest)
		return
	case !ag.Routed:
		w.Header().Set("Connection", "close")
	}
	podPort, ok := ag.Ports[t.Port]
	if !ok {
		http.Error(w, "the agent's Service has no such port", http.StatusMisdirectedRequest)
		return
	}
	ip, err := h.await(ctx, ag)
	if err != nil {
		if ctx.Err() == nil {
			if !errors.Is(err, errTimeout) {
				h.Log.Error(err, "cannot wake the agent", "namespace", ag.Namespace, "agent", ag.Name)
			}
			w.Header().Set("Retry-After", retryAfter)
			http.Error(w, "the agent is waking up; retry later", http.StatusServiceUnavailable)
		}
		return
	}
	h.markServed(ag)
	h.proxy(ag, net.JoinHostPort(ip, strconv.Itoa(int(podPort)))).ServeHTTP(w, r)
}

// markServed records that a request of the agent is proxied now.
func (h *Handler) markServed(ag *Agent) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.served == nil {
		h.served = map[string]time.Time{}
	}
	for k, at := range h.served {
		// Forget what is past its grace, so the map stays small.
		if now.Sub(at) > h.grace() {
			delete(h.served, k)
		}
	}
	h.served[ag.Namespace+"/"+ag.Name] = now
}

// recentlyServed reports whether a request of the agent was proxied
// within Grace.
func (h *Handler) recentlyServed(ag *Agent) bool {
	h.mu.Lock()
	at, ok := h.served[ag.Namespace+"/"+ag.Name]
	h.mu.Unlock()
	return ok && h.now().Sub(at) <= h.grace()
}

func (h *Handler) grace() time.Duration {
	if h.Grace > 0 {
		return h.Grace
	}
	return DefaultGrace
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// proxy returns the reverse proxy to one pod address. The Host header is
// kept, so the pod sees the request as sent to its Service;
// httputil.ReverseProxy carries protocol upgrades (WebSockets) through.
func (h *Handler) proxy(ag *Agent, addr string) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: addr})
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport: h.Transport,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			h.Log.Error(err, "cannot proxy to the agent's pod", "namespace", ag.Namespace, "agent", ag.Name)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
}

// await returns the IP of a Ready pod of the agent: at once when there
// is one, else from the agent's one flight (started when none is in
// progress), or the request's own end.
func (h *Handler) await(ctx context.Context, ag *Agent) (string, error) {
	if ip, err := h.Backend.ReadyPod(ctx, ag.Namespace, ag.Name); err == nil && ip != "" {
		return ip, nil
	}
	key := ag.Namespace + "/" + ag.Name
	h.mu.Lock()
	f, ok := h.flights[key]
	if !ok {
		if h.flights == nil {
			h.flights = map[string]*flight{}
		}
		f = &flight{done: make(chan struct{})}
		h.flights[key] = f
		// Detached from the request: the others that join still wait on it.
		go h.fly(context.WithoutCancel(ctx), key, f, *ag)
	}
	h.mu.Unlock()
	select {
	case <-f.done:
		return f.ip, f.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// fly runs one flight: the wake write when the agent needs one, then the
// wait for a Ready pod, bounded by Timeout. ctx carries the starting
// request's values but not its end: the others that joined still wait on
// it. The
// flight leaves the map before it reports, so a request after it starts
// afresh.
func (h *Handler) fly(ctx context.Context, key string, f *flight, ag Agent) {
	defer func() {
		h.mu.Lock()
		delete(h.flights, key)
		h.mu.Unlock()
		close(f.done)
	}()
	timeout, poll := h.Timeout, h.Poll
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if poll <= 0 {
		poll = DefaultPoll
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if ag.NeedsWake {
		if err := h.Backend.Wake(ctx, ag.Namespace, ag.Name, h.now()); err != nil {
			f.err = err
			return
		}
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		ip, err := h.Backend.ReadyPod(ctx, ag.Namespace, ag.Name)
		if err == nil && ip != "" {
			f.ip = ip
			return
		}
		select {
		case <-ctx.Done():
			f.err = errTimeout
			return
		case <-tick.C:
		}
	}
}
