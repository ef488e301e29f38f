package fakevendor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// geminiFile is an uploaded batch input or a written responses file.
type geminiFile struct {
	id, display, mime string
	created           time.Time
	data              []byte
}

// routeGeminiFiles serves the resumable upload protocol the SDK's
// Files.Upload speaks, file metadata and downloads.
func (s *Server) routeGeminiFiles(auth func(*http.Request) bool, deny http.HandlerFunc) {
	s.handle("POST /upload/v1beta/files", auth, deny, s.geminiUpload)
	s.handle("GET /v1beta/files/{id}", auth, deny, s.geminiFileGet)
	s.handle("GET /download/v1beta/files/{id}", auth, deny, s.geminiFileGet)
	s.handle("DELETE /v1beta/files/{id}", auth, deny, s.geminiFileDelete)
}

func geminiFileJSON(f *geminiFile, base string) map[string]any {
	ts := f.created.UTC().Format(time.RFC3339Nano)
	return map[string]any{
		"name": "files/" + f.id, "displayName": f.display, "mimeType": f.mime,
		"sizeBytes": strconv.Itoa(len(f.data)), "createTime": ts, "updateTime": ts,
		"expirationTime": f.created.Add(48 * time.Hour).UTC().Format(time.RFC3339Nano),
		"uri":            base + "/v1beta/files/" + f.id, "downloadUri": base + "/download/v1beta/files/" + f.id + ":download?alt=media",
		"state": "ACTIVE", "source": "UPLOADED",
	}
}

func (s *Server) geminiUpload(w http.ResponseWriter, r *http.Request) {
	base := "http://" + r.Host
	cmd := r.Header.Get("X-Goog-Upload-Command")
	uploadID := r.URL.Query().Get("upload_id")
	if uploadID == "" {
		if cmd != "start" {
			geminiError(w, http.StatusBadRequest, "fakevendor: expected X-Goog-Upload-Command: start")
			return
		}
		var body map[string]any
		_ = decodeJSON(r, &body) // metadata is optional
		display, _ := field(obj(body["file"]), "displayName").(string)
		f := &geminiFile{id: strings.ToLower(newID("")), display: display, mime: r.Header.Get("X-Goog-Upload-Header-Content-Type")}
		s.mu.Lock()
		f.created = s.now()
		s.gem.uploads[f.id] = f
		s.mu.Unlock()
		w.Header().Set("X-Goog-Upload-URL", base+"/upload/v1beta/files?upload_id="+f.id)
		w.Header().Set("X-Goog-Upload-Status", "active")
		writeJSON(w, http.StatusOK, map[string]any{})
		return
	}
	chunk, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 256<<20))
	if err != nil {
		geminiError(w, http.StatusBadRequest, "fakevendor: reading upload chunk: "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.gem.uploads[uploadID]
	if f == nil {
		geminiError(w, http.StatusNotFound, "Upload "+uploadID+" not found.")
		return
	}
	f.data = append(f.data, chunk...)
	if !strings.Contains(cmd, "finalize") {
		w.Header().Set("X-Goog-Upload-Status", "active")
		writeJSON(w, http.StatusOK, map[string]any{})
		return
	}
	delete(s.gem.uploads, uploadID)
	s.gem.files[f.id] = f
	w.Header().Set("X-Goog-Upload-Status", "final")
	writeJSON(w, http.StatusOK, map[string]any{"file": geminiFileJSON(f, base)})
}

func (s *Server) geminiFileGet(w http.ResponseWriter, r *http.Request) {
	id, method, _ := strings.Cut(r.PathValue("id"), ":")
	s.mu.Lock()
	f := s.gem.files[id]
	s.mu.Unlock()
	switch {
	case f == nil:
		geminiError(w, http.StatusNotFound, "File files/"+id+" not found.")
	case method == "download":
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(f.data)
	case method == "":
		writeJSON(w, http.StatusOK, geminiFileJSON(f, "http://"+r.Host))
	default:
		geminiError(w, http.StatusNotFound, "fakevendor: unsupported method "+method)
	}
}

func (s *Server) geminiFileDelete(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.gem.files[r.PathValue("id")]; !ok {
		geminiError(w, http.StatusNotFound, "File files/"+r.PathValue("id")+" not found.")
		return
	}
	delete(s.gem.files, r.PathValue("id"))
	writeJSON(w, http.StatusOK, map[string]any{})
}

// geminiFileRequests reads a JSONL input file of {"key","request"} lines;
// a non-empty message says why it is unusable.
func (s *Server) geminiFileRequests(name string) ([]geminiRequest, string) {
	s.mu.Lock()
	f := s.gem.files[strings.TrimPrefix(name, "files/")]
	s.mu.Unlock()
	if f == nil {
		return nil, "batch.input_config.file_name: file " + name + " not found"
	}
	var reqs []geminiRequest
	sc := bufio.NewScanner(bytes.NewReader(f.data))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return nil, "input file line " + strconv.Itoa(n) + ": invalid JSON: " + err.Error()
		}
		q, ok := parseGeminiRequest(obj(line["request"]))
		if !ok {
			return nil, "input file line " + strconv.Itoa(n) + ": request.contents: required"
		}
		q.key = line["key"]
		reqs = append(reqs, q)
	}
	if err := sc.Err(); err != nil {
		return nil, "input file: " + err.Error()
	}
	if len(reqs) == 0 {
		return nil, "input file " + name + " holds no requests"
	}
	return reqs, ""
}

// geminiOutputFile writes the responses file once and returns its name;
// resps is in the order of b.reqs. Callers hold s.mu.
func (s *Server) geminiOutputFile(b *geminiBatch, resps []any) string {
	if b.outFile != "" {
		return b.outFile
	}
	var buf bytes.Buffer
	for i, r := range resps {
		line := map[string]any{"key": b.reqs[i].key}
		for _, k := range []string{"response", "error"} {
			if v, ok := obj(r)[k]; ok {
				line[k] = v
			}
		}
		appendLine(&buf, line)
	}
	f := &geminiFile{id: strings.ToLower(newID("")), display: b.id + "-responses", mime: "application/jsonl",
		created: s.now(), data: buf.Bytes()}
	s.gem.files[f.id] = f
	b.outFile = "files/" + f.id
	return b.outFile
}
