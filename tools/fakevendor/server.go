// Package fakevendor is an in-process stand-in for the LLM vendors' batch
// APIs (Anthropic Message Batches, OpenAI Files + Batches, Gemini batches).
// It speaks each vendor's wire format closely enough that the official Go
// SDKs work against it with only a base-URL override, so batch code can be
// tested without the internet. Answers are deterministic from the prompt.
package fakevendor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Outcome says how a batch ends once it has finished processing.
type Outcome int

const (
	// OutcomeComplete ends the batch normally with per-request results.
	OutcomeComplete Outcome = iota
	// OutcomeExpire ends the batch as expired: no request gets a result.
	OutcomeExpire
	// OutcomeNever keeps the batch processing forever (until canceled).
	OutcomeNever
	// OutcomeFail fails the whole batch (OpenAI "failed", Gemini FAILED);
	// Anthropic has no batch-level failure, so every request errors instead.
	OutcomeFail
)

// DefaultErrorMarker is the prompt substring that makes a request fail when
// Options.ErrorMarker is empty.
const DefaultErrorMarker = "FAKEVENDOR_FAIL"

// Options are the knobs tests turn. A batch snapshots them when it is
// created, so changing them later affects only new batches.
type Options struct {
	// APIKey is the key every request must carry; empty accepts any key.
	APIKey string
	// PollsUntilEnded is how many status reads a batch needs before it
	// reports finished; 0 means it is finished at the first read.
	PollsUntilEnded int
	// Delay is the minimum time between create and finished.
	Delay time.Duration
	// Outcome is how batches end.
	Outcome Outcome
	// ErrorMarker makes a request fail when its prompt contains it.
	ErrorMarker string
	// ErrorMessage is the failed request's message; a default names the marker.
	ErrorMessage string
	// FailDeletes makes every delete answer 500, to test cleanup retries.
	FailDeletes bool
}

// Server is the fake vendor. It is safe for concurrent use.
type Server struct {
	mu      sync.Mutex
	opts    Options
	calls   map[string]int
	perID   map[string]int
	anth    *anthropicStore
	oai     *openaiStore
	gem     *geminiStore
	mux     *http.ServeMux
	httpSrv *http.Server
	now     func() time.Time
}

// New returns a Server with the given options; call Start or use it as an
// http.Handler.
func New(opts Options) *Server {
	opts.defaults()
	s := &Server{
		opts:  opts,
		calls: map[string]int{},
		perID: map[string]int{},
		anth:  newAnthropicStore(),
		oai:   newOpenAIStore(),
		gem:   newGeminiStore(),
		mux:   http.NewServeMux(),
		now:   time.Now,
	}
	s.routeAnthropic()
	s.routeOpenAI()
	s.routeGemini()
	// Counters over HTTP, so tests against the standalone binary (e.g. in
	// a container) can check poll cadence too. Not a vendor endpoint.
	s.mux.HandleFunc("GET /_fakevendor/calls", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		out := map[string]any{"routes": maps.Clone(s.calls), "batches": maps.Clone(s.perID)}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, out)
	})
	return s
}

// Configure changes the options under the server's lock; batches created
// afterwards use the new values. Empty fields get New's defaults, so an
// empty ErrorMarker never makes every prompt fail.
func (s *Server) Configure(f func(*Options)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.opts)
	s.opts.defaults()
}

// defaults fills the fields whose zero value would mean something else.
func (o *Options) defaults() {
	if o.ErrorMarker == "" {
		o.ErrorMarker = DefaultErrorMarker
	}
	if o.ErrorMessage == "" {
		o.ErrorMessage = "fakevendor: forced failure (prompt contains " + o.ErrorMarker + ")"
	}
}

// Start listens on a free port of 127.0.0.1 and returns the base URL
// ("http://127.0.0.1:PORT"). Point the SDKs at it as: Anthropic
// option.WithBaseURL(base+"/"), OpenAI option.WithBaseURL(base+"/v1/"),
// genai HTTPOptions{BaseURL: base+"/"}.
func (s *Server) Start() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	return s.Serve(ln), nil
}

// Serve serves on ln in the background and returns its base URL.
func (s *Server) Serve(ln net.Listener) string {
	s.httpSrv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.httpSrv.Serve(ln) }()
	return "http://" + ln.Addr().String()
}

// Close stops a started server.
func (s *Server) Close() error {
	if s.httpSrv == nil {
		return nil
	}
	err := s.httpSrv.Shutdown(context.Background())
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		// A handler bug must not take the test process down with it.
		if v := recover(); v != nil {
			http.Error(w, "fakevendor: internal error", http.StatusInternalServerError)
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// Calls returns how many requests an endpoint has received, keyed by the
// route pattern, e.g. "GET /v1/messages/batches/{id}" (see Routes).
func (s *Server) Calls(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[route]
}

// BatchCalls returns how many requests named this batch id (any endpoint);
// a poller test uses it to check the cadence per batch.
func (s *Server) BatchCalls(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perID[id]
}

// AllCalls returns a copy of the per-route counters.
func (s *Server) AllCalls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

// Live returns the ids of batches not yet deleted, per vendor ("anthropic",
// "openai", "gemini"), so a test can check that nothing is left behind.
// OpenAI has no batch delete, so its entry lists files not yet deleted;
// Gemini's lists batches and files.
func (s *Server) Live() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string][]string{
		"anthropic": s.anth.liveIDs(),
		"openai":    s.oai.liveFileIDs(),
		"gemini":    s.gem.liveIDs(),
	}
}

// Lose drops an Anthropic batch as if the vendor had purged it: from then
// on every call about it answers 404, as the real API does for a batch it
// no longer holds. It reports whether the batch existed.
func (s *Server) Lose(anthropicBatchID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.anth.batches[anthropicBatchID]
	delete(s.anth.batches, anthropicBatchID)
	return ok
}

// handle registers a route and wraps it with counting and an auth check.
func (s *Server) handle(pattern string, auth func(*http.Request) bool, deny http.HandlerFunc, h http.HandlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		s.count(pattern, r.PathValue("id"))
		if !auth(r) {
			deny(w, r)
			return
		}
		h(w, r)
	})
}

func (s *Server) count(route, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[route]++
	// Gemini puts custom methods after a colon ("ID:cancel").
	id, _, _ = strings.Cut(id, ":")
	if id != "" {
		s.perID[id]++
	}
}

func (s *Server) keyOK(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts.APIKey == "" || key == s.opts.APIKey
}

func bearer(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if after, ok := strings.CutPrefix(v, "Bearer "); ok {
		return after
	}
	return ""
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// lifecycle is the part of a batch every vendor shares: when it finishes
// and how. Callers hold s.mu.
type lifecycle struct {
	created   time.Time
	polls     int
	needPolls int
	delay     time.Duration
	outcome   Outcome
	marker    string
	errMsg    string
	failDel   bool
	canceled  bool
	ended     bool
	endedAt   time.Time
}

func (s *Server) newLifecycle() lifecycle {
	return lifecycle{
		created:   s.now(),
		needPolls: s.opts.PollsUntilEnded,
		delay:     s.opts.Delay,
		outcome:   s.opts.Outcome,
		marker:    s.opts.ErrorMarker,
		errMsg:    s.opts.ErrorMessage,
		failDel:   s.opts.FailDeletes,
	}
}

// poll records one status read and reports whether the batch has just
// moved to its end; a cancel ends it at the next read.
func (l *lifecycle) poll(now time.Time) bool {
	if l.ended {
		return false
	}
	l.polls++
	if l.canceled || (l.outcome != OutcomeNever && l.polls >= l.needPolls && now.Sub(l.created) >= l.delay) {
		l.ended = true
		l.endedAt = now
		return true
	}
	return false
}

// ending is how a batch ended, decided alike for every vendor.
type ending int

const (
	endSucceeded ending = iota
	endCanceled
	endExpired
	endFailed
)

// ending says how the batch ended (or will): a cancel wins over the
// requested outcome.
func (l *lifecycle) ending() ending {
	switch {
	case l.canceled:
		return endCanceled
	case l.outcome == OutcomeExpire:
		return endExpired
	case l.outcome == OutcomeFail:
		return endFailed
	}
	return endSucceeded
}
