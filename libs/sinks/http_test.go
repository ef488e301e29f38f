package sinks

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/sinks/sinkstest"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// fastRetry keeps tests quick; the schedule itself is tested in TestRetryPolicy.
var fastRetry = RetryPolicy{Attempts: 3, Base: time.Millisecond, Max: 5 * time.Millisecond}

func stamped() *eventsv1.RunEvent {
	r := events.NewRun(&eventsv1.RunIdentity{Namespace: "team", Agent: "fixer", Uid: "u"})
	return r.Stamp(msg("assistant", "hello"))
}

// server answers with the given statuses in turn (the last one repeats)
// and records every request.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	reqs     []*http.Request
	bodies   [][]byte
}

func mustPayload(t testing.TB, ev *eventsv1.RunEvent) []byte {
	t.Helper()
	b, err := Payload(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newServer(t *testing.T, statuses ...int) *server {
	s := &server{statuses: statuses}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.bodies = append(s.bodies, body)
		code := s.statuses[min(len(s.reqs), len(s.statuses))-1]
		s.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func newHTTP(t *testing.T, url string, headers http.Header) *HTTP {
	t.Helper()
	h, err := NewHTTP(HTTPOptions{URL: url, Headers: headers, Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHTTPSinkRetries(t *testing.T) {
	tests := []struct {
		name      string
		statuses  []int
		wantCalls int
		wantErr   int // status in the error, 0 for success
	}{
		{"2xx is delivered at once", []int{204}, 1, 0},
		{"5xx is retried until success", []int{500, 503, 200}, 3, 0},
		{"5xx gives up after the attempts", []int{502}, 3, 502},
		{"4xx is not retried", []int{400}, 1, 400},
		{"401 is not retried", []int{401}, 1, 401},
		{"429 is retried", []int{429, 200}, 2, 0},
		{"3xx is not followed nor retried", []int{302}, 1, 302},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.statuses...)
			err := newHTTP(t, srv.URL, nil).DeliverPayload(context.Background(), mustPayload(t, stamped()))
			if srv.count() != tt.wantCalls {
				t.Fatalf("%d requests, want %d", srv.count(), tt.wantCalls)
			}
			var se *StatusError
			switch {
			case tt.wantErr == 0 && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.wantErr != 0 && (!errors.As(err, &se) || se.Code != tt.wantErr):
				t.Fatalf("error %v, want status %d", err, tt.wantErr)
			}
		})
	}
}

func TestHTTPSinkPostsTheEnvelope(t *testing.T) {
	srv := newServer(t, 200)
	ev := stamped()
	h := http.Header{}
	h.Set("Authorization", "Bearer s3cr3t")
	h.Set("X-Team", "a")
	if err := newHTTP(t, srv.URL, h).DeliverPayload(context.Background(), mustPayload(t, ev)); err != nil {
		t.Fatal(err)
	}
	r := srv.reqs[0]
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
		r.Header.Get("Authorization") != "Bearer s3cr3t" || r.Header.Get("X-Team") != "a" {
		t.Fatalf("request %s %v", r.Method, r.Header)
	}
	var got struct {
		Source struct{ Agent, Namespace string }
		Event  struct{ Kind, Text string }
		ID     string
	}
	if err := json.Unmarshal(srv.bodies[0], &got); err != nil || got.ID != ev.GetId() || got.Event.Text != "hello" ||
		got.Source.Agent != "fixer" || got.Source.Namespace != "team" {
		t.Fatalf("body %s: %v", srv.bodies[0], err)
	}
	sinkstest.Check(t, srv.bodies[0])
}

func TestHTTPSinkRetriesNetworkErrors(t *testing.T) {
	// Accept connections and slam them shut: a network error each time.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	defer func() { _ = l.Close() }()
	err = newHTTP(t, "http://"+l.Addr().String()+"/hook?token=qs-secret", nil).DeliverPayload(context.Background(), mustPayload(t, stamped()))
	if err == nil {
		t.Fatal("want an error")
	}
	if accepted.Load() != 3 {
		t.Fatalf("%d connections, want 3 attempts", accepted.Load())
	}
	if strings.Contains(err.Error(), "qs-secret") {
		t.Fatalf("error leaks the query string: %v", err)
	}
}

func TestHTTPSinkTimeoutIsRetried(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			<-release // the first attempt hangs past the timeout
		}
	}))
	defer srv.Close()
	defer close(release)
	h, err := NewHTTP(HTTPOptions{URL: srv.URL, Timeout: 50 * time.Millisecond, Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.DeliverPayload(context.Background(), mustPayload(t, stamped())); err != nil {
		t.Fatalf("second attempt should succeed: %v", err)
	}
}
