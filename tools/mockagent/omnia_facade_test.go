package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"
)

// reports records what a reporter was asked to send.
type reports struct {
	mu  sync.Mutex
	got []int
	ch  chan int
}

func newReports() *reports { return &reports{ch: make(chan int, 100)} }

func (r *reports) report(_ context.Context, n int, _ time.Time) error {
	r.mu.Lock()
	r.got = append(r.got, n)
	r.mu.Unlock()
	r.ch <- n
	return nil
}

// next waits for the next report.
func (r *reports) next(t *testing.T) int {
	t.Helper()
	select {
	case n := <-r.ch:
		return n
	case <-time.After(5 * time.Second):
		t.Fatal("no report within 5s")
		return -1
	}
}

// none fails if a report arrives within d.
func (r *reports) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case n := <-r.ch:
		t.Fatalf("an extra report (%d sessions) within %s", n, d)
	case <-time.After(d):
	}
}

// TestActivityReportsAreRateLimited: the first change is reported at
// once; changes within the period are coalesced into one report of the
// latest count when the period ends.
func TestActivityReportsAreRateLimited(t *testing.T) {
	r := newReports()
	a := newActivity(r, 400*time.Millisecond, 0, time.Now, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.run(ctx)
	a.set(1)
	if n := r.next(t); n != 1 {
		t.Fatalf("first report %d, want 1", n)
	}
	for _, n := range []int{2, 3, 2} {
		a.set(n)
	}
	r.none(t, 200*time.Millisecond)
	if n := r.next(t); n != 2 {
		t.Fatalf("coalesced report %d, want the latest count 2", n)
	}
	r.none(t, 600*time.Millisecond)
}

// TestStatusReporterAppliesOwnEntry: a report is a server-side apply of
// the pod's own entry of status.facadeReports, on the agent's status
// subresource, with the pod's token and a field manager of the pod's own.
func TestStatusReporterAppliesOwnEntry(t *testing.T) {
	var method, path, ctype, auth string
	var query url.Values
	var body struct {
		APIVersion string                       `json:"apiVersion"`
		Kind       string                       `json:"kind"`
		Metadata   map[string]string            `json:"metadata"`
		Status     map[string][]json.RawMessage `json:"status"`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, path, ctype, auth, query = r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), r.URL.Query()
		_ = json.NewDecoder(r.Body).Decode(&body)
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	s := newStatusReporter(srv.URL, "agent", "ns", "agent-7d4b9-x2x9z", "tok", srv.Client())
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	if err := s.report(context.Background(), 2, at); err != nil {
		t.Fatal(err)
	}
	var entry string
	if len(body.Status["facadeReports"]) == 1 {
		entry = string(body.Status["facadeReports"][0])
	}
	checks := []struct{ rule, got, want string }{
		{"the method is PATCH", method, http.MethodPatch},
		{"the path is the agent's status subresource", path, "/apis/omnia.altairalabs.ai/v1alpha1/namespaces/ns/agentruntimes/agent/status"},
		{"the patch is a server-side apply", ctype, "application/apply-patch+yaml"},
		{"the field manager is the pod's own", query.Get("fieldManager"), "omnia-facade/agent-7d4b9-x2x9z"},
		{"the apply is forced", query.Get("force"), "true"},
		{"the token is the pod's", auth, "Bearer tok"},
		{"the apply names the kind", body.APIVersion + "/" + body.Kind, "omnia.altairalabs.ai/v1alpha1/AgentRuntime"},
		{"the apply names the agent", body.Metadata["namespace"] + "/" + body.Metadata["name"], "ns/agent"},
		{"the status holds only the pod's own entry", jsonText(len(body.Status)) + " " + jsonText(len(body.Status["facadeReports"])), "1 1"},
		{"the entry is the pod's count and the change's time", entry, `{"activeSessions":2,"lastActivityTime":"2026-12-03T10:00:00Z","pod":"agent-7d4b9-x2x9z"}`},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %s, want %s", c.rule, c.got, c.want)
		}
	}
}

// TestStatusReporterReportsRefusal: an answer other than 2xx is an error,
// so the report stays pending and is retried.
func TestStatusReporterReportsRefusal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer srv.Close()
	s := newStatusReporter(srv.URL, "agent", "ns", "pod", "tok", srv.Client())
	if err := s.report(context.Background(), 1, time.Now()); err == nil {
		t.Fatal("a 403 answer is no error")
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestFacadeServesAndDrainsSessions: a session is counted while it is
// open; /drain makes the facade unready and returns only once the open
// session has ended.
func TestFacadeServesAndDrainsSessions(t *testing.T) {
	runtime, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = runtime.Close() }()
	addrs := freeAddrs(t, 2)
	sessAddr, healthAddr := addrs[0], addrs[1]
	r := newReports()
	f := newFacade(facadeConfig{agent: "agent", namespace: "ns", sessionAddr: sessAddr, health: healthAddr,
		runtimeAddr: runtime.Addr().String(), drainTimeout: 10 * time.Second}, r, time.Millisecond, 0, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.serve(ctx) }()
	errs := make(chan error)
	get(t, "http://"+healthAddr+"/readyz", errs)

	sctx, endSession := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, "http://"+sessAddr+"/session", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(resp.Body).ReadString('\n'); line != "session open on agent\n" {
		t.Fatalf("session answered %q", line)
	}
	if n := r.next(t); n != 1 {
		t.Fatalf("report %d, want 1 session", n)
	}
	drained := make(chan time.Time, 1)
	go func() {
		dr, err := http.Get("http://" + healthAddr + drainPath)
		if err == nil {
			_ = dr.Body.Close()
		}
		drained <- time.Now()
	}()
	// The drain waits for the session; meanwhile the facade is unready.
	waitStatus(t, "http://"+healthAddr+"/readyz", http.StatusServiceUnavailable)
	select {
	case <-drained:
		t.Fatal("/drain returned while a session was open")
	case <-time.After(300 * time.Millisecond):
	}
	closed := time.Now()
	endSession()
	_ = resp.Body.Close()
	if at := <-drained; at.Before(closed) {
		t.Fatal("/drain returned before the session ended")
	}
	if n := r.next(t); n != 0 {
		t.Fatalf("report %d, want 0 sessions", n)
	}
	waitStatus(t, "http://"+sessAddr+"/session", http.StatusServiceUnavailable)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// freeAddrs returns n distinct free loopback addresses: all n are held
// open until each is chosen, so two of them are never the same port (the
// facade listens with SO_REUSEPORT, and would share one).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		out = append(out, l.Addr().String())
	}
	return out
}

// waitStatus polls url until it answers code.
func waitStatus(t *testing.T, url string, code int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == code {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered %d (last %v)", url, code, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestActivityHeartbeatWhileSessionsOpen: while a session is open the
// count is reported again every heartbeat; once none is, no more.
func TestActivityHeartbeatWhileSessionsOpen(t *testing.T) {
	r := newReports()
	a := newActivity(r, time.Millisecond, 150*time.Millisecond, time.Now, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.run(ctx)
	a.set(1)
	for i := range 3 {
		if n := r.next(t); n != 1 {
			t.Fatalf("report %d: %d sessions, want 1", i, n)
		}
	}
	a.set(0)
	if n := r.next(t); n != 0 {
		t.Fatalf("report %d, want 0", n)
	}
	r.none(t, 400*time.Millisecond)
}
