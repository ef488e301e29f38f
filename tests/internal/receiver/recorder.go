package receiver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Recorder is one server for every endpoint a run sends secrets to: an
// http sink at URL+"/hook", a conversation store at URL+"/store" (it
// accepts saves and has nothing to restore), and anything else (an MCP
// server at URL+"/mcp") answered 404. It keeps the headers each endpoint
// (the first path segment) was sent and the body of every sink payload,
// for suites that check where a secret went.
type Recorder struct {
	// URL is the server's base URL.
	URL     string
	mu      sync.Mutex
	bodies  [][]byte
	headers map[string]http.Header
}

// NewRecorder starts a Recorder closed when the test ends.
func NewRecorder(t *testing.T) *Recorder {
	t.Helper()
	r := &Recorder{headers: map[string]http.Header{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 64<<20))
		endpoint, _, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
		r.mu.Lock()
		h := r.headers[endpoint]
		if h == nil {
			h = http.Header{}
			r.headers[endpoint] = h
		}
		for k, vs := range req.Header {
			h[k] = append(h[k], vs...)
		}
		if endpoint == "hook" {
			r.bodies = append(r.bodies, body)
		}
		r.mu.Unlock()
		switch {
		case endpoint == "hook":
			w.WriteHeader(http.StatusNoContent)
		case endpoint == "store" && req.Method == http.MethodPost:
			w.WriteHeader(http.StatusCreated)
		default:
			http.NotFound(w, req)
		}
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// HeaderSeen returns the values of header name endpoint was sent.
func (r *Recorder) HeaderSeen(endpoint, name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.headers[endpoint].Values(name))
}

// Bodies returns the sink payloads received so far, in order.
func (r *Recorder) Bodies() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.bodies)
}
