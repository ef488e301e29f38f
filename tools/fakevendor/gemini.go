package fakevendor

import (
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

type geminiRequest struct {
	key    any
	meta   any
	prompt string
	schema any
}

type geminiBatch struct {
	id, model, display string
	seq                int
	life               lifecycle
	reqs               []geminiRequest
	fromFile           bool   // results go to a responses file, not inline
	outFile            string // name of that file once written
}

type geminiStore struct {
	batches map[string]*geminiBatch
	files   map[string]*geminiFile
	uploads map[string]*geminiFile
	seq     int
}

func newGeminiStore() *geminiStore {
	return &geminiStore{batches: map[string]*geminiBatch{}, files: map[string]*geminiFile{}, uploads: map[string]*geminiFile{}}
}

func (g *geminiStore) liveIDs() []string {
	ids := make([]string, 0, len(g.batches))
	for id := range g.batches {
		ids = append(ids, "batches/"+id)
	}
	for id := range g.files {
		ids = append(ids, "files/"+id)
	}
	slices.Sort(ids)
	return ids
}

const geminiType = "type.googleapis.com/google.ai.generativelanguage.v1main."

func (s *Server) routeGemini() {
	auth := func(r *http.Request) bool {
		k := r.Header.Get("X-Goog-Api-Key")
		if k == "" {
			k = r.URL.Query().Get("key")
		}
		return s.keyOK(k)
	}
	deny := func(w http.ResponseWriter, _ *http.Request) {
		geminiError(w, http.StatusUnauthorized, "API key not valid. Please pass a valid API key.")
	}
	// Custom methods ("X:batchGenerateContent", "ID:cancel") share a path
	// segment with the name, so one wildcard catches both and the handler
	// splits on the colon.
	s.handle("POST /v1beta/models/{model}", auth, deny, s.geminiCreate)
	s.handle("GET /v1beta/batches", auth, deny, s.geminiList)
	s.handle("GET /v1beta/batches/{id}", auth, deny, s.geminiGet)
	s.handle("POST /v1beta/batches/{id}", auth, deny, s.geminiCancel)
	s.handle("DELETE /v1beta/batches/{id}", auth, deny, s.geminiDelete)
	s.routeGeminiFiles(auth, deny)
}

var geminiStatus = map[int]string{
	http.StatusBadRequest: "INVALID_ARGUMENT", http.StatusUnauthorized: "UNAUTHENTICATED",
	http.StatusNotFound: "NOT_FOUND", http.StatusInternalServerError: "INTERNAL",
}

func geminiError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"code": code, "message": msg, "status": geminiStatus[code]}})
}

// field reads a key in camelCase or snake_case, as the API accepts both.
func field(m map[string]any, camel string) any {
	if v, ok := m[camel]; ok {
		return v
	}
	var b strings.Builder
	for _, r := range camel {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return m[b.String()]
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func (s *Server) geminiCreate(w http.ResponseWriter, r *http.Request) {
	model, method, _ := strings.Cut(r.PathValue("model"), ":")
	if method != "batchGenerateContent" {
		geminiError(w, http.StatusNotFound, "fakevendor: unsupported method "+method)
		return
	}
	var body map[string]any
	if err := decodeJSON(r, &body); err != nil {
		geminiError(w, http.StatusBadRequest, "Invalid JSON payload received. "+err.Error())
		return
	}
	batch := obj(body["batch"])
	in := obj(field(batch, "inputConfig"))
	var reqs []geminiRequest
	if name, _ := field(in, "fileName").(string); name != "" {
		var msg string
		if reqs, msg = s.geminiFileRequests(name); msg != "" {
			geminiError(w, http.StatusBadRequest, msg)
			return
		}
	} else {
		items, _ := obj(field(in, "requests"))["requests"].([]any)
		if len(items) == 0 {
			geminiError(w, http.StatusBadRequest, "batch.input_config.requests.requests: at least one request is required")
			return
		}
		for i, it := range items {
			q, ok := parseGeminiRequest(obj(field(obj(it), "request")))
			if !ok {
				geminiError(w, http.StatusBadRequest, "batch.input_config.requests.requests["+strconv.Itoa(i)+"].request.contents: required")
				return
			}
			q.meta = obj(it)["metadata"]
			q.key = obj(q.meta)["key"]
			reqs = append(reqs, q)
		}
	}
	display, _ := field(batch, "displayName").(string)
	s.mu.Lock()
	s.gem.seq++
	b := &geminiBatch{id: strings.ToLower(newID("")), model: "models/" + model, display: display,
		seq: s.gem.seq, life: s.newLifecycle(), reqs: reqs, fromFile: field(in, "fileName") != nil}
	s.gem.batches[b.id] = b
	s.replyUnlock(w, s.geminiJSON(b))
}

// geminiBatchFor returns the batch and the custom method after the colon,
// with s.mu held when the batch exists.
func (s *Server) geminiBatchFor(w http.ResponseWriter, r *http.Request) (*geminiBatch, string) {
	id, method, _ := strings.Cut(r.PathValue("id"), ":")
	b := lockedFind(s, func() *geminiBatch { return s.gem.batches[id] }, func() {
		geminiError(w, http.StatusNotFound, "Batch batches/"+id+" not found.")
	})
	return b, method
}

func (s *Server) geminiGet(w http.ResponseWriter, r *http.Request) {
	b, _ := s.geminiBatchFor(w, r)
	if b == nil {
		return
	}
	b.life.poll(s.now())
	s.replyUnlock(w, s.geminiJSON(b))
}

func (s *Server) geminiCancel(w http.ResponseWriter, r *http.Request) {
	b, method := s.geminiBatchFor(w, r)
	if b == nil {
		return
	}
	defer s.mu.Unlock()
	if method != "cancel" {
		geminiError(w, http.StatusNotFound, "fakevendor: unsupported method "+method)
		return
	}
	if !b.life.ended {
		// Cancel stops the job at once: the next read reports CANCELLED.
		b.life.canceled = true
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

func (s *Server) geminiDelete(w http.ResponseWriter, r *http.Request) {
	b, _ := s.geminiBatchFor(w, r)
	if b == nil {
		return
	}
	defer s.mu.Unlock()
	if b.life.failDel {
		geminiError(w, http.StatusInternalServerError, "fakevendor: delete failure requested")
		return
	}
	delete(s.gem.batches, b.id)
	writeJSON(w, http.StatusOK, map[string]any{})
}

func (s *Server) geminiList(w http.ResponseWriter, r *http.Request) {
	size, ok := queryInt(r, "pageSize", 50, 1, math.MaxInt)
	if !ok {
		geminiError(w, http.StatusBadRequest, "pageSize: must be a positive integer")
		return
	}
	// Larger page sizes are served as 1000, as the API does.
	size = min(size, 1000)
	s.mu.Lock()
	all := newestFirst(s.gem.batches)
	if i := indexOf(all, r.URL.Query().Get("pageToken")); i >= 0 {
		all = all[i:]
	}
	out := map[string]any{}
	if len(all) > size {
		out["nextPageToken"] = all[size].id
		all = all[:size]
	}
	ops := make([]any, 0, len(all))
	for _, b := range all {
		ops = append(ops, s.geminiJSON(b))
	}
	s.mu.Unlock()
	out["operations"] = ops
	writeJSON(w, http.StatusOK, out)
}

// geminiState names the batch state on the wire; callers hold s.mu.
func geminiState(b *geminiBatch) string {
	switch {
	case !b.life.ended && b.life.polls == 0:
		return "BATCH_STATE_PENDING"
	case !b.life.ended:
		return "BATCH_STATE_RUNNING"
	}
	return [...]string{
		endSucceeded: "BATCH_STATE_SUCCEEDED", endCanceled: "BATCH_STATE_CANCELLED",
		endExpired: "BATCH_STATE_EXPIRED", endFailed: "BATCH_STATE_FAILED",
	}[b.life.ending()]
}

// geminiJSON renders the batch as the long-running Operation the API
// returns; callers hold s.mu.
func (s *Server) geminiJSON(b *geminiBatch) map[string]any {
	state := geminiState(b)
	name := "batches/" + b.id
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	n := int64(len(b.reqs))
	ok, failed := int64(0), int64(0)
	meta := map[string]any{
		"@type": geminiType + "GenerateContentBatch", "name": name, "model": b.model,
		"displayName": b.display, "state": state, "createTime": ts(b.life.created), "updateTime": ts(s.now()),
	}
	op := map[string]any{"name": name, "metadata": meta}
	if state == "BATCH_STATE_SUCCEEDED" {
		var resps []any
		for _, q := range b.reqs {
			if strings.Contains(q.prompt, b.life.marker) {
				failed++
				resps = append(resps, map[string]any{"metadata": q.meta,
					"error": map[string]any{"code": 3, "message": b.life.errMsg}})
				continue
			}
			ok++
			resps = append(resps, map[string]any{"metadata": q.meta, "response": geminiResponse(q, b.model)})
		}
		output := map[string]any{"inlinedResponses": map[string]any{"inlinedResponses": resps}}
		if b.fromFile {
			output = map[string]any{"responsesFile": s.geminiOutputFile(b, resps)}
		}
		meta["output"] = output
		op["response"] = map[string]any{"@type": geminiType + "GenerateContentBatchOutput"}
		maps.Copy(op["response"].(map[string]any), output)
	}
	if b.life.ended {
		meta["endTime"] = ts(b.life.endedAt)
		op["done"] = true
		switch state {
		case "BATCH_STATE_FAILED":
			op["error"] = map[string]any{"code": 13, "message": "fakevendor: batch failure requested"}
		case "BATCH_STATE_CANCELLED":
			op["error"] = map[string]any{"code": 1, "message": "The batch was cancelled."}
		}
	}
	pending := n - ok - failed
	if b.life.ended {
		pending = 0
	}
	str := func(v int64) string { return strconv.FormatInt(v, 10) }
	// int64 counts travel as JSON strings in Google's APIs.
	meta["batchStats"] = map[string]any{"requestCount": str(n), "successfulRequestCount": str(ok),
		"failedRequestCount": str(failed), "pendingRequestCount": str(pending)}
	return op
}

func geminiResponse(q geminiRequest, model string) map[string]any {
	text := answerFor(q.prompt, q.schema)
	in, out := tokens(q.prompt), tokens(text)
	return map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}},
			"finishReason": "STOP", "index": 0,
		}},
		"usageMetadata": map[string]any{"promptTokenCount": in, "candidatesTokenCount": out, "totalTokenCount": in + out},
		"modelVersion":  strings.TrimPrefix(model, "models/"),
		"responseId":    newID(""),
	}
}

// parseGeminiRequest reads one GenerateContentRequest; ok is false when it
// has no contents.
func parseGeminiRequest(req map[string]any) (q geminiRequest, ok bool) {
	contents, _ := req["contents"].([]any)
	if len(contents) == 0 {
		return q, false
	}
	for _, c := range contents {
		if cm := obj(c); cm["role"] == nil || cm["role"] == "user" {
			q.prompt = textOf(cm["parts"])
		}
	}
	gc := obj(field(req, "generationConfig"))
	if q.schema = field(gc, "responseJsonSchema"); q.schema == nil {
		q.schema = field(gc, "responseSchema")
	}
	return q, true
}
