package activator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAgent is one agent of the fake cluster.
type fakeAgent struct {
	agent Agent
	// pod is the address of its Ready pod ("" for none): "127.0.0.1"
	// with the pod's port in agent.Ports.
	pod string
	// readyOnWake makes the pod Ready when the agent is woken.
	readyOnWake string
}

// fake is a Backend over a map of agents, counting what it is asked.
type fake struct {
	mu      sync.Mutex
	agents  map[string]*fakeAgent // by "ns/svc"
	wakes   map[string][]time.Time
	lookups int
	// wakeGate, when set, holds a wake until it is closed.
	wakeGate chan struct{}
	agentErr error
}

func (f *fake) Agent(_ context.Context, ns, svc string) (*Agent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	if f.agentErr != nil {
		return nil, f.agentErr
	}
	a, ok := f.agents[ns+"/"+svc]
	if !ok {
		return nil, nil
	}
	cp := a.agent
	return &cp, nil
}

func (f *fake) Wake(ctx context.Context, ns, name string, at time.Time) error {
	if f.wakeGate != nil {
		select {
		case <-f.wakeGate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.wakes == nil {
		f.wakes = map[string][]time.Time{}
	}
	f.wakes[ns+"/"+name] = append(f.wakes[ns+"/"+name], at)
	if a := f.agents[ns+"/"+name]; a != nil && a.readyOnWake != "" {
		a.pod = a.readyOnWake
	}
	return nil
}

func (f *fake) ReadyPod(_ context.Context, ns, name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a := f.agents[ns+"/"+name]; a != nil {
		return a.pod, nil
	}
	return "", nil
}

func (f *fake) wakesOf(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.wakes[key])
}

// pod is a stand-in agent pod on loopback that answers with its name and
// the Host it was sent.
func pod(t *testing.T, name string) (port int32) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s", name, r.Host, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// serve sends one request with Host host through h.
func serve(h http.Handler, host string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "http://"+host+"/session", nil)
	r.Host = host
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestHandlerRefuses: the activator serves only agents routed to it, on
// their Services' ports; nothing else gets through, so it is no open
// proxy.
func TestHandlerRefuses(t *testing.T) {
	upPort, otherPort := pod(t, "up"), pod(t, "other")
	f := &fake{agents: map[string]*fakeAgent{
		// An agent that is up: its Service is not routed here.
		"team/up": {agent: Agent{Namespace: "team", Name: "up", Ports: map[int32]int32{8080: upPort}}, pod: "127.0.0.1"},
		// A reaped agent, routed here, with no pod yet.
		"team/idle": {agent: Agent{Namespace: "team", Name: "idle", Routed: true, Ports: map[int32]int32{8080: otherPort}}},
	}}
	h := &Handler{Backend: f, Timeout: time.Millisecond}
	cases := []struct {
		name, host string
		want       int
	}{
		{"a Host that names no Service is unknown", "example.com", http.StatusNotFound},
		{"an IP address is unknown", "127.0.0.1:" + strconv.Itoa(int(upPort)), http.StatusNotFound},
		{"a Service of no agent is unknown", "kubernetes.default.svc:443", http.StatusNotFound},
		{"an agent that is up is not reached through the activator", "up.team.svc:8080", http.StatusMisdirectedRequest},
		{"a port the agent's Service does not have is refused", "idle.team.svc:" + strconv.Itoa(int(otherPort)), http.StatusMisdirectedRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(h, tc.host)
			if w.Code != tc.want {
				t.Errorf("%s: %d %q; want %d", tc.host, w.Code, w.Body.String(), tc.want)
			}
			if strings.HasPrefix(w.Body.String(), "up ") || strings.HasPrefix(w.Body.String(), "other ") {
				t.Errorf("%s reached a pod: %q", tc.host, w.Body.String())
			}
		})
	}
	if n := f.wakesOf("team/up") + f.wakesOf("team/idle"); n != 0 {
		t.Errorf("%d wake(s) written for refused requests", n)
	}
}

// TestHandlerProxiesOnlyToTheNamedAgentsPod: a woken agent's request
// reaches that agent's pod, on the pod port of the Service port asked
// for, with the Host kept; never another agent's pod.
func TestHandlerProxiesOnlyToTheNamedAgentsPod(t *testing.T) {
	aPort, bPort := pod(t, "agent-a"), pod(t, "agent-b")
	f := &fake{agents: map[string]*fakeAgent{
		"team/a": {agent: Agent{Namespace: "team", Name: "a", Routed: true, NeedsWake: true, Ports: map[int32]int32{80: aPort}}, readyOnWake: "127.0.0.1"},
		"team/b": {agent: Agent{Namespace: "team", Name: "b", Ports: map[int32]int32{80: bPort}}, pod: "127.0.0.1"},
	}}
	h := &Handler{Backend: f, Poll: time.Millisecond}
	w := serve(h, "a.team.svc.cluster.local")
	if w.Code != http.StatusOK || w.Body.String() != "agent-a a.team.svc.cluster.local /session" {
		t.Fatalf("%d %q; want agent a's pod to answer", w.Code, w.Body.String())
	}
	if n := f.wakesOf("team/a"); n != 1 {
		t.Errorf("%d wake writes; want 1", n)
	}
}

// TestHandlerOneWakeForConcurrentRequests: N requests for one reaped
// agent share one wake write and all reach its pod once it is Ready.
func TestHandlerOneWakeForConcurrentRequests(t *testing.T) {
	const n = 20
	port := pod(t, "agent")
	f := &fake{wakeGate: make(chan struct{}), agents: map[string]*fakeAgent{
		"team/agent": {agent: Agent{Namespace: "team", Name: "agent", Routed: true, NeedsWake: true, Ports: map[int32]int32{8080: port}}, readyOnWake: "127.0.0.1"},
	}}
	h := &Handler{Backend: f, Poll: time.Millisecond}
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() { codes[i] = serve(h, "agent.team.svc:8080").Code })
	}
	// The wake is held until every request has looked the agent up, so
	// all of them are in before the pod is Ready.
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.mu.Lock()
		in := f.lookups
		f.mu.Unlock()
		if in >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(f.wakeGate)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("request %d: %d; want 200", i, c)
		}
	}
	if got := f.wakesOf("team/agent"); got != 1 {
		t.Errorf("%d wake writes for %d requests; want 1", got, n)
	}
}

// TestHandlerPendingWakeIsNotWrittenAgain: an agent whose wake is
// pending already is waited on, not woken again.
func TestHandlerPendingWakeIsNotWrittenAgain(t *testing.T) {
	f := &fake{agents: map[string]*fakeAgent{
		"team/agent": {agent: Agent{Namespace: "team", Name: "agent", Routed: true, Ports: map[int32]int32{80: 1}}},
	}}
	h := &Handler{Backend: f, Timeout: 20 * time.Millisecond, Poll: time.Millisecond}
	if w := serve(h, "agent.team"); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("%d; want 503", w.Code)
	}
	if got := f.wakesOf("team/agent"); got != 0 {
		t.Errorf("%d wake writes; want none", got)
	}
}

// TestHandlerTimeout: an agent with no Ready pod by the timeout is a 503
// with Retry-After, and the next request starts a new wait.
func TestHandlerTimeout(t *testing.T) {
	f := &fake{agents: map[string]*fakeAgent{
		"team/agent": {agent: Agent{Namespace: "team", Name: "agent", Routed: true, NeedsWake: true, Ports: map[int32]int32{80: 1}}},
	}}
	h := &Handler{Backend: f, Timeout: 20 * time.Millisecond, Poll: time.Millisecond}
	for i := range 2 {
		w := serve(h, "agent.team.svc")
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Fatalf("request %d: %d, Retry-After %q; want 503 with Retry-After", i, w.Code, w.Header().Get("Retry-After"))
		}
	}
	if got := f.wakesOf("team/agent"); got != 2 {
		t.Errorf("%d wake writes for two waits in turn; want 2", got)
	}
}

// TestHandlerBackendFailure: a failed read of the agent is a 503 with
// Retry-After, not a proxy.
func TestHandlerBackendFailure(t *testing.T) {
	h := &Handler{Backend: &fake{agentErr: errors.New("injected")}}
	w := serve(h, "agent.team.svc")
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("%d; want 503 with Retry-After", w.Code)
	}
}

// TestHandlerProxiesUpgrades: a WebSocket-style upgrade goes through to
// the pod and the connection carries bytes both ways.
func TestHandlerProxiesUpgrades(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "no upgrade", http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = rw.Flush()
		line, _ := rw.ReadString('\n')
		fmt.Fprint(rw, "echo "+line)
		_ = rw.Flush()
	}))
	defer up.Close()
	_, p, _ := net.SplitHostPort(up.Listener.Addr().String())
	port, _ := strconv.Atoi(p)
	f := &fake{agents: map[string]*fakeAgent{
		"team/agent": {agent: Agent{Namespace: "team", Name: "agent", Routed: true, Ports: map[int32]int32{80: int32(port)}}, pod: "127.0.0.1"},
	}}
	act := httptest.NewServer(&Handler{Backend: f})
	defer act.Close()
	conn, err := net.Dial("tcp", act.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: agent.team.svc\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %q; want 101", resp.StatusCode, b)
	}
	fmt.Fprint(conn, "hello\n")
	got, err := br.ReadString('\n')
	if err != nil || got != "echo hello\n" {
		t.Fatalf("read %q, %v; want the pod's echo", got, err)
	}
}

// TestHandlerGraceAfterRouting: an agent this activator served stays
// servable for Grace once its Service is routed back to its pods (kept-
// alive connections still arrive here), with Connection: close so the
// client moves to the pod; past Grace it is refused like any agent that
// is up.
func TestHandlerGraceAfterRouting(t *testing.T) {
	port := pod(t, "agent")
	f := &fake{agents: map[string]*fakeAgent{
		"team/agent": {agent: Agent{Namespace: "team", Name: "agent", Routed: true, Ports: map[int32]int32{80: port}}, pod: "127.0.0.1"},
	}}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	h := &Handler{Backend: f, Grace: time.Minute, Now: func() time.Time { return now }}
	if w := serve(h, "agent.team.svc"); w.Code != http.StatusOK || w.Header().Get("Connection") == "close" {
		t.Fatalf("routed: %d, Connection %q; want 200 on a kept connection", w.Code, w.Header().Get("Connection"))
	}
	f.mu.Lock()
	f.agents["team/agent"].agent.Routed = false
	f.mu.Unlock()
	now = now.Add(30 * time.Second)
	if w := serve(h, "agent.team.svc"); w.Code != http.StatusOK || w.Header().Get("Connection") != "close" {
		t.Fatalf("within grace: %d, Connection %q; want 200 with Connection: close", w.Code, w.Header().Get("Connection"))
	}
	now = now.Add(2 * time.Minute)
	if w := serve(h, "agent.team.svc"); w.Code != http.StatusMisdirectedRequest {
		t.Fatalf("past grace: %d; want 421", w.Code)
	}
}
