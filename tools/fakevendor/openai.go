package fakevendor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

type openaiFile struct {
	id      string
	name    string
	purpose string
	created time.Time
	data    []byte
	deleted bool
}

type openaiLine struct {
	customID string
	url      string
	model    string
	prompt   string
	schema   any
}

type openaiBatch struct {
	id, endpoint, inputFile string
	seq                     int
	life                    lifecycle
	lines                   []openaiLine
	invalid                 []map[string]any
	metadata                map[string]any
	outFile, errFile        string
	cancelAt                time.Time
}

type openaiStore struct {
	files   map[string]*openaiFile
	batches map[string]*openaiBatch
	seq     int
}

func newOpenAIStore() *openaiStore {
	return &openaiStore{files: map[string]*openaiFile{}, batches: map[string]*openaiBatch{}}
}

func (o *openaiStore) liveFileIDs() []string {
	var ids []string
	for id, f := range o.files {
		if !f.deleted {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (s *Server) routeOpenAI() {
	auth := func(r *http.Request) bool { return s.keyOK(bearer(r)) }
	deny := func(w http.ResponseWriter, _ *http.Request) {
		openaiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
	}
	s.handle("POST /v1/files", auth, deny, s.openaiUpload)
	s.handle("GET /v1/files/{id}", auth, deny, s.openaiFileGet)
	s.handle("GET /v1/files/{id}/content", auth, deny, s.openaiFileContent)
	s.handle("DELETE /v1/files/{id}", auth, deny, s.openaiFileDelete)
	s.handle("POST /v1/batches", auth, deny, s.openaiCreate)
	s.handle("GET /v1/batches", auth, deny, s.openaiList)
	s.handle("GET /v1/batches/{id}", auth, deny, s.openaiGet)
	s.handle("POST /v1/batches/{id}/cancel", auth, deny, s.openaiCancel)
}

func openaiError(w http.ResponseWriter, code int, typ, errCode, msg string) {
	writeJSON(w, code, map[string]any{"error": openaiErrBody(typ, errCode, msg)})
}

func openaiErrBody(typ, errCode, msg string) map[string]any {
	var c any
	if errCode != "" {
		c = errCode
	}
	return map[string]any{"message": msg, "type": typ, "param": nil, "code": c}
}

func fileJSON(f *openaiFile) map[string]any {
	return map[string]any{
		"id": f.id, "object": "file", "bytes": len(f.data), "created_at": f.created.Unix(),
		"filename": f.name, "purpose": f.purpose, "status": "processed",
	}
}

func (s *Server) openaiUpload(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 256<<20)
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "", "expected a multipart/form-data body: "+err.Error())
		return
	}
	purpose := r.FormValue("purpose")
	if purpose == "" {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "", "purpose: Field required")
		return
	}
	part, hdr, err := r.FormFile("file")
	if err != nil {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "", "file: Field required")
		return
	}
	defer func() { _ = part.Close() }()
	data, err := io.ReadAll(part)
	if err != nil {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "", "file: "+err.Error())
		return
	}
	s.mu.Lock()
	f := &openaiFile{id: newID("file-"), name: hdr.Filename, purpose: purpose, created: s.now(), data: data}
	s.oai.files[f.id] = f
	s.replyUnlock(w, fileJSON(f))
}

// openaiFileFor returns with s.mu held when the file exists.
func (s *Server) openaiFileFor(w http.ResponseWriter, r *http.Request) *openaiFile {
	id := r.PathValue("id")
	return lockedFind(s, func() *openaiFile {
		if f := s.oai.files[id]; f != nil && !f.deleted {
			return f
		}
		return nil
	}, func() {
		openaiError(w, http.StatusNotFound, "invalid_request_error", "", "No such File object: "+id)
	})
}

func (s *Server) openaiFileGet(w http.ResponseWriter, r *http.Request) {
	if f := s.openaiFileFor(w, r); f != nil {
		s.replyUnlock(w, fileJSON(f))
	}
}

func (s *Server) openaiFileContent(w http.ResponseWriter, r *http.Request) {
	if f := s.openaiFileFor(w, r); f != nil {
		data := f.data
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(data)
	}
}

func (s *Server) openaiFileDelete(w http.ResponseWriter, r *http.Request) {
	f := s.openaiFileFor(w, r)
	if f == nil {
		return
	}
	defer s.mu.Unlock()
	if s.opts.FailDeletes {
		openaiError(w, http.StatusInternalServerError, "server_error", "", "fakevendor: delete failure requested")
		return
	}
	f.deleted = true
	writeJSON(w, http.StatusOK, map[string]any{"id": f.id, "object": "file", "deleted": true})
}

func (s *Server) openaiCreate(w http.ResponseWriter, r *http.Request) {
	var body struct {
		InputFileID      string         `json:"input_file_id"`
		Endpoint         string         `json:"endpoint"`
		CompletionWindow string         `json:"completion_window"`
		Metadata         map[string]any `json:"metadata"`
	}
	if err := decodeJSON(r, &body); err != nil {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	switch body.Endpoint {
	case "/v1/chat/completions", "/v1/responses":
	default:
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "", "endpoint: unsupported by fakevendor: "+body.Endpoint)
		return
	}
	if body.CompletionWindow != "24h" {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "", "completion_window: only '24h' is supported")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.oai.files[body.InputFileID]
	if f == nil || f.deleted {
		openaiError(w, http.StatusNotFound, "invalid_request_error", "", "No such File object: "+body.InputFileID)
		return
	}
	s.oai.seq++
	b := &openaiBatch{
		id: newID("batch_"), endpoint: body.Endpoint, inputFile: f.id, seq: s.oai.seq,
		life: s.newLifecycle(), metadata: body.Metadata,
	}
	b.lines, b.invalid = parseBatchInput(f.data, body.Endpoint)
	if len(b.invalid) > 0 {
		// Validation happens asynchronously at the vendor, so a bad file
		// gives a batch that fails rather than a 400 on create.
		b.life.ended, b.life.endedAt = true, s.now()
	}
	s.oai.batches[b.id] = b
	writeJSON(w, http.StatusOK, s.openaiJSON(b))
}

// parseBatchInput reads the JSONL input; problems become the batch's
// errors.data entries, as the vendor's validator reports them.
func parseBatchInput(data []byte, endpoint string) ([]openaiLine, []map[string]any) {
	var lines []openaiLine
	var bad []map[string]any
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	n := 0
	fail := func(code, msg string) {
		bad = append(bad, map[string]any{"code": code, "message": msg, "param": nil, "line": n})
	}
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var in struct {
			CustomID string         `json:"custom_id"`
			Method   string         `json:"method"`
			URL      string         `json:"url"`
			Body     map[string]any `json:"body"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			fail("invalid_json_line", "This line is not parseable as valid JSON.")
			continue
		}
		switch {
		case in.CustomID == "" || seen[in.CustomID]:
			fail("duplicate_custom_id", "custom_id must be present and unique within the file.")
		case in.Method != "POST":
			fail("invalid_method", "method must be POST.")
		case in.URL != endpoint:
			fail("mismatched_endpoint", fmt.Sprintf("url %q does not match the batch endpoint %q.", in.URL, endpoint))
		case in.Body == nil:
			fail("missing_required_parameter", "body is required.")
		case in.Body["stream"] == true:
			fail("invalid_request", "stream is not supported in batches.")
		default:
			seen[in.CustomID] = true
			model, _ := in.Body["model"].(string)
			prompt, schema := openaiPrompt(in.URL, in.Body)
			lines = append(lines, openaiLine{customID: in.CustomID, url: in.URL, model: model, prompt: prompt, schema: schema})
		}
	}
	if err := sc.Err(); err != nil {
		fail("invalid_json_line", "the file could not be read: "+err.Error())
	}
	if len(lines) == 0 && len(bad) == 0 {
		fail("empty_file", "The batch input file is empty.")
	}
	models := map[string]bool{}
	for _, l := range lines {
		models[l.model] = true
	}
	if len(models) > 1 {
		fail("model_mismatch", "A batch input file may target only one model.")
	}
	return lines, bad
}

// openaiPrompt finds the last user text and any JSON schema in a Chat
// Completions or Responses body.
func openaiPrompt(url string, body map[string]any) (string, any) {
	obj := func(v any, key string) map[string]any {
		m, _ := v.(map[string]any)
		r, _ := m[key].(map[string]any)
		return r
	}
	prompt := ""
	if url == "/v1/responses" {
		switch in := body["input"].(type) {
		case string:
			prompt = in
		case []any:
			for _, it := range in {
				if m, ok := it.(map[string]any); ok && m["role"] == "user" {
					prompt = textOf(m["content"])
				}
			}
		}
		format := obj(body["text"], "format")
		if format["type"] == "json_schema" {
			return prompt, format["schema"]
		}
		return prompt, nil
	}
	msgs, _ := body["messages"].([]any)
	for _, it := range msgs {
		if m, ok := it.(map[string]any); ok && m["role"] == "user" {
			prompt = textOf(m["content"])
		}
	}
	if rf, _ := body["response_format"].(map[string]any); rf["type"] == "json_schema" {
		return prompt, obj(rf, "json_schema")["schema"]
	}
	return prompt, nil
}

// openaiBatchFor returns with s.mu held when the batch exists.
func (s *Server) openaiBatchFor(w http.ResponseWriter, r *http.Request) *openaiBatch {
	id := r.PathValue("id")
	return lockedFind(s, func() *openaiBatch { return s.oai.batches[id] }, func() {
		openaiError(w, http.StatusNotFound, "invalid_request_error", "", "No batch found with id '"+id+"'.")
	})
}

func (s *Server) openaiGet(w http.ResponseWriter, r *http.Request) {
	if b := s.openaiBatchFor(w, r); b != nil {
		if b.life.poll(s.now()) {
			s.openaiFinish(b)
		}
		s.replyUnlock(w, s.openaiJSON(b))
	}
}

func (s *Server) openaiCancel(w http.ResponseWriter, r *http.Request) {
	b := s.openaiBatchFor(w, r)
	if b == nil {
		return
	}
	defer s.mu.Unlock()
	if b.life.ended {
		openaiError(w, http.StatusConflict, "invalid_request_error", "", "Cannot cancel a batch with status "+s.openaiStatus(b)+".")
		return
	}
	if !b.life.canceled {
		b.life.canceled, b.cancelAt = true, s.now()
	}
	writeJSON(w, http.StatusOK, s.openaiJSON(b))
}

func (s *Server) openaiList(w http.ResponseWriter, r *http.Request) {
	limit, ok := queryInt(r, "limit", 20, 1, 100)
	if !ok {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "", "limit: must be an integer between 1 and 100")
		return
	}
	s.mu.Lock()
	all := newestFirst(s.oai.batches)
	if i := indexOf(all, r.URL.Query().Get("after")); i >= 0 {
		all = all[i+1:]
	}
	hasMore := len(all) > limit
	if hasMore {
		all = all[:limit]
	}
	data, first, last := renderPage(all, s.openaiJSON)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": hasMore})
}

// openaiFinish writes the output and error files when a batch ends;
// callers hold s.mu.
func (s *Server) openaiFinish(b *openaiBatch) {
	var out, errs bytes.Buffer
	for _, l := range b.lines {
		line := map[string]any{"id": newID("batch_req_"), "custom_id": l.customID, "response": nil, "error": nil}
		end := b.life.ending()
		switch {
		case end == endCanceled:
			line["error"] = map[string]any{"code": "batch_cancelled", "message": "This request was not executed because the batch was cancelled."}
		case end == endExpired:
			line["error"] = map[string]any{"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}
		case end == endFailed:
			continue
		case strings.Contains(l.prompt, b.life.marker):
			line["response"] = map[string]any{"status_code": 400, "request_id": newID("req_"),
				"body": map[string]any{"error": openaiErrBody("invalid_request_error", "", b.life.errMsg)}}
		default:
			line["response"] = map[string]any{"status_code": 200, "request_id": newID("req_"), "body": openaiBody(l, b.life.endedAt)}
			appendLine(&out, line)
			continue
		}
		appendLine(&errs, line)
	}
	mk := func(buf *bytes.Buffer, kind string) string {
		if buf.Len() == 0 {
			return ""
		}
		f := &openaiFile{id: newID("file-"), name: b.id + "_" + kind + ".jsonl", purpose: "batch_output",
			created: s.now(), data: bytes.Clone(buf.Bytes())}
		s.oai.files[f.id] = f
		return f.id
	}
	b.outFile, b.errFile = mk(&out, "output"), mk(&errs, "error")
}

func appendLine(buf *bytes.Buffer, v any) {
	b, _ := json.Marshal(v)
	buf.Write(append(b, '\n'))
}

func openaiBody(l openaiLine, at time.Time) map[string]any {
	text := answerFor(l.prompt, l.schema)
	in, out := tokens(l.prompt), tokens(text)
	if l.url == "/v1/responses" {
		return map[string]any{
			"id": newID("resp_"), "object": "response", "created_at": at.Unix(), "status": "completed",
			"model": l.model, "error": nil, "incomplete_details": nil,
			"output": []any{map[string]any{
				"type": "message", "id": newID("msg_"), "status": "completed", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}},
			}},
			"usage": map[string]any{
				"input_tokens": in, "output_tokens": out, "total_tokens": in + out,
				"input_tokens_details":  map[string]any{"cached_tokens": 0},
				"output_tokens_details": map[string]any{"reasoning_tokens": 0},
			},
		}
	}
	return map[string]any{
		"id": newID("chatcmpl-"), "object": "chat.completion", "created": at.Unix(), "model": l.model,
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": "stop", "logprobs": nil,
			"message": map[string]any{"role": "assistant", "content": text, "refusal": nil},
		}},
		"usage": map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
	}
}
