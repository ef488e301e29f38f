// Package receiver is an http sink endpoint written the way a user writes
// one: against the payload docs/events.md documents, not the project's
// types. Every payload is also checked against the published schema, and
// the test fails at cleanup if one did not match.
package receiver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/sinks/sinkstest"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// Payload is the documented sink payload.
type Payload struct {
	Source struct {
		Agent     string `json:"agent"`
		Station   string `json:"station"`
		Task      string `json:"task"`
		Pod       string `json:"pod"`
		Namespace string `json:"namespace"`
	} `json:"source"`
	// Event is the CLI's line or the run's own event object.
	Event json.RawMessage `json:"event"`
	// ID is the event's dedupe id (an additive field).
	ID string `json:"id"`
}

// Lifecycle returns "phase/status" for a lifecycle payload.
func (p Payload) Lifecycle() (string, bool) {
	var o struct{ Kind, Phase, Status string }
	if json.Unmarshal(p.Event, &o) != nil || o.Kind != "lifecycle" {
		return "", false
	}
	return o.Phase + "/" + o.Status, true
}

// Receiver records what it is POSTed.
type Receiver struct {
	// URL is where the sink should POST.
	URL string
	srv *httptest.Server
	mu  sync.Mutex
	got []Payload
	bad []string
}

// New starts a Receiver on loopback, stopped when t ends.
func New(t *testing.T) *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(io.LimitReader(req.Body, 16<<20))
		var p Payload
		if err == nil && req.Header.Get("Content-Type") != "application/json" {
			err = fmt.Errorf("content type %q", req.Header.Get("Content-Type"))
		}
		if err == nil {
			err = json.Unmarshal(body, &p)
		}
		if err == nil {
			err = sinkstest.Validate(body)
		}
		r.mu.Lock()
		if err != nil {
			r.bad = append(r.bad, fmt.Sprintf("%v: %.200s", err, body))
		} else {
			r.got = append(r.got, p)
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	r.URL = r.srv.URL + "/hook"
	t.Cleanup(func() {
		r.srv.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, b := range r.bad {
			t.Errorf("the receiver got a payload that does not follow docs/events.md: %s", b)
		}
	})
	return r
}

// Payloads returns what the receiver got so far, in arrival order.
func (r *Receiver) Payloads() []Payload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// Of returns the payloads whose source names agent.
func (r *Receiver) Of(agent string) []Payload {
	var out []Payload
	for _, p := range r.Payloads() {
		if p.Source.Agent == agent {
			out = append(out, p)
		}
	}
	return out
}

// Lifecycles returns "phase/status" of every lifecycle payload of agent.
func (r *Receiver) Lifecycles(agent string) []string {
	var out []string
	for _, p := range r.Of(agent) {
		if lc, ok := p.Lifecycle(); ok {
			out = append(out, lc)
		}
	}
	return out
}

// Expected returns the ids of the payloads a sink without output.select
// gets for a run whose stream holds evs: one per CLI line (under its first
// event's id, the one that carries the line) and one per event of the run
// itself, in order.
func Expected(evs []*eventsv1.RunEvent) []string {
	var out []string
	for _, ev := range evs {
		if !events.IsCLIEvent(ev) || len(ev.GetRaw()) > 0 {
			out = append(out, ev.GetId())
		}
	}
	return out
}
