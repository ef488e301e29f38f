package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// testFacade is a facade for agent "agent" in "ns" whose runtime is at
// runtimeAddr, reporting to rep.
func testFacade(runtimeAddr string, rep reporter) *facade {
	return newFacade(facadeConfig{agent: "agent", namespace: "ns", runtimeAddr: runtimeAddr, drainTimeout: time.Second},
		rep, time.Millisecond, 0, slog.New(slog.DiscardHandler))
}

// TestFacadeInvoke: POST /invoke takes a JSON object, passes it and the
// run's headers to the runtime and answers the runtime's echo; anything
// else is refused with a status that says why, and only accepted calls
// are counted.
func TestFacadeInvoke(t *testing.T) {
	echo := httptest.NewServer(omniaRuntimeMux("1.2.0"))
	defer echo.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// A JSON answer, so only its status makes it a failure.
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":"boom"}`)
	}))
	defer failing.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	downAddr := down.Listener.Addr().String()
	down.Close()
	host := func(s *httptest.Server) string { return s.Listener.Addr().String() }

	cases := []struct {
		rule      string
		method    string
		body      string
		runtime   string
		draining  bool
		wantCode  int
		wantCount float64
	}{
		{rule: "a JSON object is forwarded to the runtime and answered 200", method: http.MethodPost, body: `{"city":"Oslo"}`, runtime: host(echo), wantCode: 200, wantCount: 1},
		{rule: "an empty object is a JSON object", method: http.MethodPost, body: `{}`, runtime: host(echo), wantCode: 200, wantCount: 1},
		{rule: "an array body is 400", method: http.MethodPost, body: `[1,2]`, runtime: host(echo), wantCode: 400},
		{rule: "a string body is 400", method: http.MethodPost, body: `"hi"`, runtime: host(echo), wantCode: 400},
		{rule: "a null body is 400", method: http.MethodPost, body: `null`, runtime: host(echo), wantCode: 400},
		{rule: "an empty body is 400", method: http.MethodPost, body: ``, runtime: host(echo), wantCode: 400},
		{rule: "a body that is not JSON is 400", method: http.MethodPost, body: `{"a":`, runtime: host(echo), wantCode: 400},
		{rule: "two objects in one body is 400", method: http.MethodPost, body: `{}{}`, runtime: host(echo), wantCode: 400},
		{rule: "a body over 1 MiB is 413", method: http.MethodPost, body: `{"a":"` + strings.Repeat("x", maxInvokeBody) + `"}`, runtime: host(echo), wantCode: 413},
		{rule: "GET is 405", method: http.MethodGet, runtime: host(echo), wantCode: 405},
		{rule: "PUT is 405", method: http.MethodPut, body: `{}`, runtime: host(echo), wantCode: 405},
		{rule: "a runtime that answers 500 is 502, the call still counted", method: http.MethodPost, body: `{}`, runtime: host(failing), wantCode: 502, wantCount: 1},
		{rule: "a runtime that cannot be reached is 502, the call still counted", method: http.MethodPost, body: `{}`, runtime: downAddr, wantCode: 502, wantCount: 1},
		{rule: "a draining facade answers 503 and counts nothing", method: http.MethodPost, body: `{}`, runtime: host(echo), draining: true, wantCode: 503},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			f := testFacade(c.runtime, nil)
			f.draining = c.draining
			srv := httptest.NewServer(f.sessionMux())
			defer srv.Close()
			req, _ := http.NewRequest(c.method, srv.URL+invokePath, strings.NewReader(c.body))
			req.Header.Set(headerFunction, "ns/nightly")
			req.Header.Set(headerScheduleTime, "2026-12-03T10:00:00Z")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != c.wantCode {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, c.wantCode)
			}
			if c.wantCode == 405 && resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow %q, want POST", resp.Header.Get("Allow"))
			}
			if c.wantCode == 200 {
				var got struct {
					Invocation int `json:"invocation"`
					Output     struct {
						Input       json.RawMessage `json:"input"`
						Function    string          `json:"function"`
						PackVersion string          `json:"packVersion"`
					} `json:"output"`
				}
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatalf("answer %s: %v", body, err)
				}
				if got.Invocation != 1 || string(got.Output.Input) != c.body || got.Output.Function != "ns/nightly" || got.Output.PackVersion != "1.2.0" {
					t.Errorf("answer %s: want invocation 1 and the runtime's echo of %s from ns/nightly, pack 1.2.0", body, c.body)
				}
			}
			if n := metricValue(t, f, invocationsMetric); n != c.wantCount {
				t.Errorf("%s = %v, want %v", invocationsMetric, n, c.wantCount)
			}
			if n := metricValue(t, f, connectionsMetric); n != 0 {
				t.Errorf("%s = %v after the call, want 0", connectionsMetric, n)
			}
		})
	}
}

// stamped records each report's count and time.
type stamped struct {
	mu  sync.Mutex
	got []stamp
	ch  chan stamp
}

type stamp struct {
	n  int
	at time.Time
}

func (s *stamped) report(_ context.Context, n int, at time.Time) error {
	s.mu.Lock()
	s.got = append(s.got, stamp{n, at})
	s.mu.Unlock()
	s.ch <- stamp{n, at}
	return nil
}

func (s *stamped) next(t *testing.T) stamp {
	t.Helper()
	select {
	case r := <-s.ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no report within 5s")
		return stamp{}
	}
}

// TestInvocationIsSessionActivity: an invocation opens a session while
// it runs and closes it after, so the agent's reports (and thus
// lastActivityTime) and the connections gauge move with it, and an
// invoked function agent is not reaped idle.
func TestInvocationIsSessionActivity(t *testing.T) {
	release := make(chan struct{})
	runtime := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		<-release
		_, _ = io.WriteString(w, `{"done":true}`)
	}))
	defer runtime.Close()
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	// Runs before runtime.Close, which waits for the held call.
	defer unblock()
	rep := &stamped{ch: make(chan stamp, 100)}
	f := testFacade(runtime.Listener.Addr().String(), rep)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.act.run(ctx)
	srv := httptest.NewServer(f.sessionMux())
	defer srv.Close()

	start := time.Now()
	done := make(chan int, 1)
	go func() {
		resp, err := srv.Client().Post(srv.URL+invokePath, "application/json", strings.NewReader(`{}`))
		if err != nil {
			done <- 0
			return
		}
		_ = resp.Body.Close()
		done <- resp.StatusCode
	}()
	if r := rep.next(t); r.n != 1 || r.at.Before(start) {
		t.Fatalf("report while invoking: %d session(s) at %s, want 1 at or after %s", r.n, r.at, start)
	}
	if n := metricValue(t, f, connectionsMetric); n != 1 {
		t.Errorf("%s = %v while invoking, want 1", connectionsMetric, n)
	}
	unblock()
	if code := <-done; code != http.StatusOK {
		t.Fatalf("invoke answered %d, want 200", code)
	}
	if r := rep.next(t); r.n != 0 || r.at.Before(start) {
		t.Fatalf("report after the call: %d session(s) at %s, want 0 at or after %s", r.n, r.at, start)
	}
	if n := metricValue(t, f, connectionsMetric); n != 0 {
		t.Errorf("%s = %v after the call, want 0", connectionsMetric, n)
	}
}
