package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// invokePath is where a function-mode agent is called: a
// ScheduledFunction's run POSTs its input there, on the rest facade's
// port (services/omnia-controllers internal/scheduledfunction invoke.go
// InvokePath), and the facade passes it on to the runtime on the same
// path.
const invokePath = "/invoke"

// The headers a run carries (scheduledfunction HeaderFunction and
// HeaderScheduleTime); the facade passes them on to the runtime.
const (
	headerFunction     = "X-Omnia-Scheduled-Function"
	headerScheduleTime = "X-Omnia-Schedule-Time"
)

// maxInvokeBody caps an invocation's input and the runtime's answer, so
// one large call cannot take the stand-in's memory.
const maxInvokeBody = 1 << 20

// invokeAnswer is the facade's answer to a successful invocation.
type invokeAnswer struct {
	// Invocation is this facade's count of accepted invocations,
	// this one included.
	Invocation int `json:"invocation"`
	// Output is the runtime's answer.
	Output json.RawMessage `json:"output"`
}

// invoke serves POST /invoke: the body must be a JSON object (400
// otherwise); it is forwarded to the runtime and the runtime's JSON
// answer returned (502 when the runtime fails). An invocation is a
// session while it runs (it opens and closes one), so it moves the
// agent's lastActivityTime and an invoked function agent is not reaped
// idle; a draining facade refuses it like a session (503).
func (f *facade) invoke(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInvokeBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("body: larger than %d bytes", maxInvokeBody), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !isJSONObject(body) {
		http.Error(w, "body: must be a JSON object", http.StatusBadRequest)
		return
	}
	if !f.begin() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	defer f.end()
	n := f.countInvocation()
	out, err := f.forward(r, body)
	if err != nil {
		// The error names the runtime's status or the dial failure,
		// never the input.
		http.Error(w, "runtime: "+err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(invokeAnswer{Invocation: n, Output: out})
}

// isJSONObject reports whether b is one JSON object (not null, an array,
// a scalar or several values).
func isJSONObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// countInvocation counts an accepted invocation and returns the count.
func (f *facade) countInvocation() int {
	f.mu.Lock()
	f.invocations++
	n := f.invocations
	f.mu.Unlock()
	f.met.invocations.Inc()
	return n
}

// forward POSTs body to the runtime's invokePath with the run's headers
// and returns its answer, which must be 2xx and JSON.
func (f *facade) forward(r *http.Request, body []byte) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://"+f.cfg.runtimeAddr+invokePath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for _, h := range []string{headerFunction, headerScheduleTime} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxInvokeBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("answered %s", resp.Status)
	}
	if !json.Valid(out) {
		return nil, errors.New("answered no JSON")
	}
	return out, nil
}

// runtimeEcho is the runtime stand-in's POST /invoke: it answers the
// input it got, the function that called and the pack version, so a test
// or the demo sees the call went through the facade to the runtime.
func runtimeEcho(version string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInvokeBody))
		if err != nil || !json.Valid(in) {
			http.Error(w, "body: must be JSON", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Input       json.RawMessage `json:"input"`
			Function    string          `json:"function,omitempty"`
			PackVersion string          `json:"packVersion,omitempty"`
		}{in, r.Header.Get(headerFunction), version})
	}
}
