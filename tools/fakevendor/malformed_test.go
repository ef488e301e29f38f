package fakevendor_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/tools/fakevendor"
)

// bodyRoutes are the endpoints that read a request body, with the header
// each vendor authenticates by.
var bodyRoutes = []struct{ vendor, path, authHeader, authValue string }{
	{"anthropic", "/v1/messages/batches", "X-Api-Key", testKey},
	{"openai", "/v1/batches", "Authorization", "Bearer " + testKey},
	{"openai", "/v1/files", "Authorization", "Bearer " + testKey},
	{"gemini", "/v1beta/models/gemini-3-flash:batchGenerateContent", "X-Goog-Api-Key", testKey},
}

// vendorErrorShape reports whether body is the vendor's error envelope.
func vendorErrorShape(vendor string, body []byte) bool {
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Status  string `json:"status"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		return false
	}
	switch vendor {
	case "anthropic":
		return e.Type == "error" && e.Error.Type != ""
	case "openai":
		return e.Error.Type != ""
	default:
		return e.Error.Status != "" && e.Error.Code != nil
	}
}

func post(h http.Handler, path, hdr, val, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set(hdr, val)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestMalformedBodiesGet400InTheVendorErrorShape(t *testing.T) {
	bodies := []struct{ name, body string }{
		{"empty body", ""},
		{"truncated JSON", `{"requests":[`},
		{"wrong types", `{"requests":"x","batch":7,"input_file_id":[],"endpoint":{}}`},
		{"JSON null", `null`},
		{"empty requests", `{"requests":[],"batch":{"inputConfig":{"requests":{"requests":[]}}}}`},
		{"request without fields", `{"requests":[{}],"batch":{"inputConfig":{"requests":{"requests":[{}]}}}}`},
		{"not JSON at all", "\x00\xff{{"},
	}
	srv := fakevendor.New(fakevendor.Options{APIKey: testKey})
	for _, rt := range bodyRoutes {
		for _, b := range bodies {
			t.Run(rt.path+"/"+b.name, func(t *testing.T) {
				rec := post(srv, rt.path, rt.authHeader, rt.authValue, b.body)
				if rec.Code != http.StatusBadRequest {
					t.Errorf("status %d, want 400: %s", rec.Code, rec.Body)
				}
				if !vendorErrorShape(rt.vendor, rec.Body.Bytes()) {
					t.Errorf("not a %s error body: %s", rt.vendor, rec.Body)
				}
			})
		}
	}
}

func FuzzRequestBodies(f *testing.F) {
	for _, s := range []string{
		`{"requests":[{"custom_id":"a","params":{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"output_config":{"format":{"schema":{"type":"object"}}}}}]}`,
		`{"input_file_id":"file-x","endpoint":"/v1/chat/completions","completion_window":"24h"}`,
		`{"batch":{"inputConfig":{"requests":{"requests":[{"request":{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"responseSchema":{"type":"ARRAY","items":{"type":"OBJECT"}}}},"metadata":{"key":"k"}}]}}}}`,
		`{"batch":{"input_config":{"file_name":"files/nope"}}}`,
		`[1,2,3]`, `{"requests":[{"custom_id":"a","params":{"messages":[{"content":5}]}}]}`,
	} {
		f.Add(s)
	}
	srv := fakevendor.New(fakevendor.Options{APIKey: testKey})
	f.Fuzz(func(t *testing.T, body string) {
		for _, rt := range bodyRoutes {
			rec := post(srv, rt.path, rt.authHeader, rt.authValue, body)
			if rec.Code >= 500 || !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s: status %d body %q", rt.path, rec.Code, rec.Body)
			}
			// Poll whatever was created so result rendering is fuzzed too.
			var created struct{ ID, Name string }
			_ = json.Unmarshal(rec.Body.Bytes(), &created)
			for _, id := range []string{created.ID, created.Name} {
				if id == "" || strings.ContainsAny(id, "/?#") && !strings.HasPrefix(id, "batches/") {
					continue
				}
				path := map[string]string{"anthropic": "/v1/messages/batches/", "openai": "/v1/batches/", "gemini": "/v1beta/"}[rt.vendor] + id
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.Header.Set(rt.authHeader, rt.authValue)
				req.Header.Set("Anthropic-Version", "2023-06-01")
				get := httptest.NewRecorder()
				srv.ServeHTTP(get, req)
				if get.Code >= 500 {
					t.Fatalf("GET %s: %d %s", path, get.Code, get.Body)
				}
			}
		}
	})
}

func TestMalformedJSONLInputFailsTheOpenAIBatch(t *testing.T) {
	cases := []struct{ name, jsonl, wantCode string }{
		{"line that is not JSON", "{oops\n", "invalid_json_line"},
		{"duplicate custom_id", `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}` + "\n" +
			`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}`, "duplicate_custom_id"},
		{"GET method", `{"custom_id":"a","method":"GET","url":"/v1/chat/completions","body":{}}`, "invalid_method"},
		{"other endpoint", `{"custom_id":"a","method":"POST","url":"/v1/responses","body":{}}`, "mismatched_endpoint"},
		{"two models", `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}` + "\n" +
			`{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"model":"n"}}`, "model_mismatch"},
		{"empty file", "\n\n", "empty_file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, base := start(t, fakevendor.Options{})
			c := openaiClient(base, testKey)
			b := openaiSubmitRaw(t, c, tc.jsonl)
			if b.Status != "failed" || len(b.Errors.Data) == 0 || b.Errors.Data[0].Code != tc.wantCode {
				t.Errorf("status %q errors %+v, want failed with %s", b.Status, b.Errors.Data, tc.wantCode)
			}
		})
	}
}

func TestCallsEndpointReportsCountsPerRouteAndBatch(t *testing.T) {
	srv := fakevendor.New(fakevendor.Options{APIKey: testKey})
	rec := post(srv, "/v1/messages/batches", "X-Api-Key", testKey,
		`{"requests":[{"custom_id":"a","params":{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}}]}`)
	var b struct{ ID string }
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.ID == "" {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	for range 2 {
		req := httptest.NewRequest(http.MethodGet, "/v1/messages/batches/"+b.ID, nil)
		req.Header.Set("X-Api-Key", testKey)
		req.Header.Set("Anthropic-Version", "2023-06-01")
		srv.ServeHTTP(httptest.NewRecorder(), req)
	}
	got := httptest.NewRecorder()
	srv.ServeHTTP(got, httptest.NewRequest(http.MethodGet, "/_fakevendor/calls", nil))
	var calls struct{ Routes, Batches map[string]int }
	if err := json.Unmarshal(got.Body.Bytes(), &calls); err != nil {
		t.Fatal(err)
	}
	if calls.Routes["GET /v1/messages/batches/{id}"] != 2 || calls.Batches[b.ID] != 2 || calls.Routes["POST /v1/messages/batches"] != 1 {
		t.Errorf("calls = %+v", calls)
	}
}

func TestAnthropicRequiresVersionHeader(t *testing.T) {
	srv := fakevendor.New(fakevendor.Options{APIKey: testKey})
	req := httptest.NewRequest(http.MethodGet, "/v1/messages/batches", nil)
	req.Header.Set("X-Api-Key", testKey)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !vendorErrorShape("anthropic", rec.Body.Bytes()) {
		t.Errorf("status %d body %s, want 400 invalid_request_error", rec.Code, rec.Body)
	}
}
