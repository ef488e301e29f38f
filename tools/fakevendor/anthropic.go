package fakevendor

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

var customIDRe = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

type anthropicRequest struct {
	customID string
	model    string
	prompt   string
	schema   any
}

type anthropicBatch struct {
	id       string
	seq      int
	life     lifecycle
	reqs     []anthropicRequest
	cancelAt *time.Time
}

type anthropicStore struct {
	batches map[string]*anthropicBatch
	seq     int
}

func newAnthropicStore() *anthropicStore {
	return &anthropicStore{batches: map[string]*anthropicBatch{}}
}

func (a *anthropicStore) liveIDs() []string {
	ids := make([]string, 0, len(a.batches))
	for id := range a.batches {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (s *Server) routeAnthropic() {
	auth := func(r *http.Request) bool {
		// The docs use x-api-key; SDK v2 sends a bearer token. Accept both.
		if k := r.Header.Get("X-Api-Key"); k != "" {
			return s.keyOK(k)
		}
		return s.keyOK(bearer(r))
	}
	deny := func(w http.ResponseWriter, _ *http.Request) {
		anthropicError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
	}
	// The real API refuses requests without a version header; SDK v2 sends
	// 2026-10-21, raw clients usually 2023-06-01. Any value is accepted.
	versioned := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Anthropic-Version") == "" {
				anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
				return
			}
			h(w, r)
		}
	}
	s.handle("POST /v1/messages/batches", auth, deny, versioned(s.anthropicCreate))
	s.handle("GET /v1/messages/batches", auth, deny, versioned(s.anthropicList))
	s.handle("GET /v1/messages/batches/{id}", auth, deny, versioned(s.anthropicGet))
	s.handle("GET /v1/messages/batches/{id}/results", auth, deny, versioned(s.anthropicResults))
	s.handle("POST /v1/messages/batches/{id}/cancel", auth, deny, versioned(s.anthropicCancel))
	s.handle("DELETE /v1/messages/batches/{id}", auth, deny, versioned(s.anthropicDelete))
}

func anthropicError(w http.ResponseWriter, code int, typ, msg string) {
	writeJSON(w, code, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": msg},
		"request_id": newID("req_"),
	})
}

func (s *Server) anthropicCreate(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Requests []struct {
			CustomID string `json:"custom_id"`
			Params   struct {
				Model     string `json:"model"`
				MaxTokens int64  `json:"max_tokens"`
				Messages  []struct {
					Role    string `json:"role"`
					Content any    `json:"content"`
				} `json:"messages"`
				OutputConfig struct {
					Format struct {
						Schema any `json:"schema"`
					} `json:"format"`
				} `json:"output_config"`
				OutputFormat struct {
					Schema any `json:"schema"`
				} `json:"output_format"`
			} `json:"params"`
		} `json:"requests"`
	}
	if err := decodeJSON(r, &body); err != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "invalid JSON body: "+err.Error())
		return
	}
	if n := len(body.Requests); n < 1 || n > 100000 {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "requests: must have between 1 and 100000 items")
		return
	}
	seen := map[string]bool{}
	reqs := make([]anthropicRequest, 0, len(body.Requests))
	for i, q := range body.Requests {
		field := fmt.Sprintf("requests.%d", i)
		switch {
		case !customIDRe.MatchString(q.CustomID):
			anthropicError(w, http.StatusBadRequest, "invalid_request_error", field+".custom_id: must match ^[a-zA-Z0-9_-]{1,64}$")
			return
		case seen[q.CustomID]:
			anthropicError(w, http.StatusBadRequest, "invalid_request_error", field+".custom_id: duplicate custom_id "+q.CustomID)
			return
		case q.Params.Model == "":
			anthropicError(w, http.StatusBadRequest, "invalid_request_error", field+".params.model: Field required")
			return
		case q.Params.MaxTokens < 1:
			anthropicError(w, http.StatusBadRequest, "invalid_request_error", field+".params.max_tokens: must be at least 1")
			return
		case len(q.Params.Messages) == 0:
			anthropicError(w, http.StatusBadRequest, "invalid_request_error", field+".params.messages: at least one message is required")
			return
		}
		seen[q.CustomID] = true
		prompt := ""
		for _, m := range q.Params.Messages {
			if m.Role == "user" {
				prompt = textOf(m.Content)
			}
		}
		schema := q.Params.OutputConfig.Format.Schema
		if schema == nil {
			schema = q.Params.OutputFormat.Schema
		}
		reqs = append(reqs, anthropicRequest{customID: q.CustomID, model: q.Params.Model, prompt: prompt, schema: schema})
	}
	s.mu.Lock()
	s.anth.seq++
	b := &anthropicBatch{id: newID("msgbatch_"), seq: s.anth.seq, life: s.newLifecycle(), reqs: reqs}
	s.anth.batches[b.id] = b
	s.replyUnlock(w, s.anthropicJSON(b))
}

// anthropicBatchFor looks a batch up, answering 404 itself when missing.
// It returns with s.mu held on success.
func (s *Server) anthropicBatchFor(w http.ResponseWriter, r *http.Request) *anthropicBatch {
	id := r.PathValue("id")
	return lockedFind(s, func() *anthropicBatch { return s.anth.batches[id] }, func() {
		anthropicError(w, http.StatusNotFound, "not_found_error", "message batch not found: "+id)
	})
}

func (s *Server) anthropicGet(w http.ResponseWriter, r *http.Request) {
	b := s.anthropicBatchFor(w, r)
	if b == nil {
		return
	}
	b.life.poll(s.now())
	s.replyUnlock(w, s.anthropicJSON(b))
}

func (s *Server) anthropicCancel(w http.ResponseWriter, r *http.Request) {
	b := s.anthropicBatchFor(w, r)
	if b == nil {
		return
	}
	if !b.life.ended && !b.life.canceled {
		b.life.canceled = true
		t := s.now()
		b.cancelAt = &t
	}
	s.replyUnlock(w, s.anthropicJSON(b))
}

func (s *Server) anthropicDelete(w http.ResponseWriter, r *http.Request) {
	b := s.anthropicBatchFor(w, r)
	if b == nil {
		return
	}
	defer s.mu.Unlock()
	switch {
	case b.life.failDel:
		anthropicError(w, http.StatusInternalServerError, "api_error", "fakevendor: delete failure requested")
	case !b.life.ended:
		anthropicError(w, http.StatusBadRequest, "invalid_request_error",
			"Message batch "+b.id+" cannot be deleted while processing; cancel it first")
	default:
		delete(s.anth.batches, b.id)
		writeJSON(w, http.StatusOK, map[string]any{"id": b.id, "type": "message_batch_deleted"})
	}
}

func (s *Server) anthropicList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := queryInt(r, "limit", 20, 1, 1000)
	if !ok {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "limit: must be an integer between 1 and 1000")
		return
	}
	s.mu.Lock()
	all := newestFirst(s.anth.batches)
	start, end := 0, len(all)
	for i, b := range all {
		if b.id == q.Get("after_id") {
			start = i + 1
		}
		if b.id == q.Get("before_id") {
			end = i
		}
	}
	page := all[min(start, end):end]
	hasMore := len(page) > limit
	if hasMore {
		page = page[:limit]
	}
	data, first, last := renderPage(page, s.anthropicJSON)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": hasMore, "first_id": first, "last_id": last})
}

func (s *Server) anthropicResults(w http.ResponseWriter, r *http.Request) {
	b := s.anthropicBatchFor(w, r)
	if b == nil {
		return
	}
	if !b.life.ended {
		s.mu.Unlock()
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "Message batch "+r.PathValue("id")+" has not yet ended")
		return
	}
	lines := make([][]byte, 0, len(b.reqs))
	for _, q := range b.reqs {
		line, _ := json.Marshal(map[string]any{"custom_id": q.customID, "result": anthropicResult(b, q)})
		lines = append(lines, line)
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-jsonl")
	for _, l := range lines {
		_, _ = w.Write(append(l, '\n'))
	}
}

func anthropicResult(b *anthropicBatch, q anthropicRequest) map[string]any {
	switch b.life.ending() {
	case endCanceled:
		return map[string]any{"type": "canceled"}
	case endExpired:
		return map[string]any{"type": "expired"}
	case endFailed:
		return anthropicErrored("api_error", "fakevendor: batch failure requested")
	}
	if strings.Contains(q.prompt, b.life.marker) {
		return anthropicErrored("invalid_request_error", b.life.errMsg)
	}
	text := answerFor(q.prompt, q.schema)
	return map[string]any{"type": "succeeded", "message": map[string]any{
		"id":            newID("msg_"),
		"type":          "message",
		"role":          "assistant",
		"model":         q.model,
		"content":       []any{map[string]any{"type": "text", "text": text}},
		"stop_reason":   "end_turn",
		"stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens":                tokens(q.prompt),
			"output_tokens":               tokens(text),
			"cache_creation_input_tokens": 0,
			"cache_read_input_tokens":     0,
			"service_tier":                "batch",
		},
	}}
}

func anthropicErrored(typ, msg string) map[string]any {
	return map[string]any{"type": "errored", "error": map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": msg},
		"request_id": newID("req_"),
	}}
}

// anthropicJSON renders a MessageBatch; callers hold s.mu.
func (s *Server) anthropicJSON(b *anthropicBatch) map[string]any {
	counts := map[string]int{"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
	status := "in_progress"
	var endedAt, resultsURL any
	if b.life.canceled {
		status = "canceling"
	}
	if b.life.ended {
		status = "ended"
		endedAt = b.life.endedAt.UTC().Format(time.RFC3339Nano)
		resultsURL = "/v1/messages/batches/" + b.id + "/results"
		for _, q := range b.reqs {
			counts[anthropicResult(b, q)["type"].(string)]++
		}
	} else {
		// Requests count as processing until the whole batch has ended.
		counts["processing"] = len(b.reqs)
	}
	var cancelAt any
	if b.cancelAt != nil {
		cancelAt = b.cancelAt.UTC().Format(time.RFC3339Nano)
	}
	return map[string]any{
		"id":                  b.id,
		"type":                "message_batch",
		"processing_status":   status,
		"request_counts":      counts,
		"created_at":          b.life.created.UTC().Format(time.RFC3339Nano),
		"expires_at":          b.life.created.Add(24 * time.Hour).UTC().Format(time.RFC3339Nano),
		"ended_at":            endedAt,
		"archived_at":         nil,
		"cancel_initiated_at": cancelAt,
		"results_url":         resultsURL,
	}
}
