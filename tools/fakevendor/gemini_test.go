package fakevendor_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/agentplane/agentplane/tools/fakevendor"
)

func geminiClient(t *testing.T, base, key string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: key, Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: base + "/"}})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

func geminiRequest(key, prompt string, schema map[string]any) *genai.InlinedRequest {
	q := &genai.InlinedRequest{Contents: genai.Text(prompt), Metadata: map[string]string{"key": key}}
	if schema != nil {
		q.Config = &genai.GenerateContentConfig{ResponseMIMEType: "application/json", ResponseJsonSchema: schema}
	}
	return q
}

func geminiPoll(t *testing.T, c *genai.Client, name string) (*genai.BatchJob, int) {
	t.Helper()
	for n := 1; n <= 100; n++ {
		b, err := c.Batches.Get(context.Background(), name, nil)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		switch b.State {
		case genai.JobStateSucceeded, genai.JobStateFailed, genai.JobStateCancelled, genai.JobStateExpired:
			return b, n
		}
	}
	t.Fatalf("batch %s never ended", name)
	return nil, 0
}

func TestGeminiBatchResultsFollowPrompts(t *testing.T) {
	srv, base := start(t, fakevendor.Options{PollsUntilEnded: 2, ErrorMessage: "boom"})
	c := geminiClient(t, base, testKey)
	ctx := context.Background()
	schema := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}
	cases := []struct {
		name, key, prompt string
		schema            map[string]any
		wantText, wantErr string
	}{
		{"plain prompt succeeds with a deterministic answer", "plain", "say hi", nil, "fake answer to: say hi", ""},
		{"JSON schema output returns JSON in the schema", "schema", "count", schema, `{"n":0}`, ""},
		{"marker in the prompt errors with the configured message", "bad", "x FAKEVENDOR_FAIL", nil, "", "boom"},
	}
	var reqs []*genai.InlinedRequest
	for _, tc := range cases {
		reqs = append(reqs, geminiRequest(tc.key, tc.prompt, tc.schema))
	}
	job, err := c.Batches.Create(ctx, "gemini-3-flash", &genai.BatchJobSource{InlinedRequests: reqs}, &genai.CreateBatchJobConfig{DisplayName: "t"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if job.State != genai.JobStatePending || job.DisplayName != "t" {
		t.Errorf("new job state %q name %q", job.State, job.DisplayName)
	}
	done, polls := geminiPoll(t, c, job.Name)
	if done.State != genai.JobStateSucceeded || polls != 2 || srv.Calls("GET /v1beta/batches/{id}") != 2 {
		t.Fatalf("state %q after %d polls (%d counted)", done.State, polls, srv.Calls("GET /v1beta/batches/{id}"))
	}
	if done.Dest == nil || len(done.Dest.InlinedResponses) != len(cases) {
		t.Fatalf("dest = %+v", done.Dest)
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := done.Dest.InlinedResponses[i] // order follows the input
			if r.Metadata["key"] != tc.key {
				t.Errorf("key %q, want %q", r.Metadata["key"], tc.key)
			}
			if tc.wantErr != "" {
				if r.Error == nil || r.Error.Message != tc.wantErr {
					t.Errorf("error %+v, want %q", r.Error, tc.wantErr)
				}
				return
			}
			if r.Response == nil || r.Response.Text() != tc.wantText {
				t.Errorf("response %+v, want %q", r.Response, tc.wantText)
			}
		})
	}
	if _, err := c.Batches.Delete(ctx, job.Name, nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if live := srv.Live()["gemini"]; len(live) != 0 {
		t.Errorf("left behind: %v", live)
	}
}

func TestGeminiBatchLifecycle(t *testing.T) {
	cases := []struct {
		name   string
		opts   fakevendor.Options
		cancel bool
		want   genai.JobState
	}{
		{"cancel ends the job as cancelled", fakevendor.Options{Outcome: fakevendor.OutcomeNever}, true, genai.JobStateCancelled},
		{"expiry ends the job as expired", fakevendor.Options{Outcome: fakevendor.OutcomeExpire}, false, genai.JobStateExpired},
		{"a scripted failure fails the job", fakevendor.Options{Outcome: fakevendor.OutcomeFail}, false, genai.JobStateFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, base := start(t, tc.opts)
			c := geminiClient(t, base, testKey)
			ctx := context.Background()
			job, err := c.Batches.Create(ctx, "gemini-3-flash", &genai.BatchJobSource{
				InlinedRequests: []*genai.InlinedRequest{geminiRequest("r1", "hello", nil)}}, nil)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if tc.cancel {
				if err := c.Batches.Cancel(ctx, job.Name, nil); err != nil {
					t.Fatalf("cancel: %v", err)
				}
			}
			done, _ := geminiPoll(t, c, job.Name)
			if done.State != tc.want || done.Dest != nil {
				t.Errorf("state %q dest %+v, want %q without results", done.State, done.Dest, tc.want)
			}
			page, err := c.Batches.List(ctx, &genai.ListBatchJobsConfig{PageSize: 10})
			if err != nil || len(page.Items) != 1 || page.Items[0].Name != job.Name {
				t.Errorf("list: %v %+v", err, page.Items)
			}
			if _, err := c.Batches.Delete(ctx, job.Name, nil); err != nil {
				t.Fatalf("delete: %v", err)
			}
			_, err = c.Batches.Get(ctx, job.Name, nil)
			var apiErr genai.APIError
			if !errors.As(err, &apiErr) || apiErr.Code != http.StatusNotFound {
				t.Errorf("get after delete: %v, want 404", err)
			}
		})
	}
}

func TestGeminiRejectsWrongAPIKey(t *testing.T) {
	_, base := start(t, fakevendor.Options{})
	c := geminiClient(t, base, "wrong")
	_, err := c.Batches.Get(context.Background(), "batches/x", nil)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusUnauthorized || apiErr.Status != "UNAUTHENTICATED" {
		t.Fatalf("err = %v, want 401 UNAUTHENTICATED", err)
	}
}

func TestGeminiFileBatchWritesAResponsesFile(t *testing.T) {
	srv, base := start(t, fakevendor.Options{ErrorMessage: "boom"})
	c := geminiClient(t, base, testKey)
	ctx := context.Background()
	in := `{"key":"a","request":{"contents":[{"role":"user","parts":[{"text":"first"}]}]}}` + "\n" +
		`{"key":"b","request":{"contents":[{"parts":[{"text":"FAKEVENDOR_FAIL"}]}]}}` + "\n"
	f, err := c.Files.Upload(ctx, strings.NewReader(in), &genai.UploadFileConfig{MIMEType: "jsonl", DisplayName: "in"})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	job, err := c.Batches.Create(ctx, "gemini-3-flash", &genai.BatchJobSource{FileName: f.Name}, nil)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	done, _ := geminiPoll(t, c, job.Name)
	if done.State != genai.JobStateSucceeded || done.Dest == nil || done.Dest.FileName == "" {
		t.Fatalf("state %q dest %+v", done.State, done.Dest)
	}
	data, err := c.Files.Download(ctx, genai.NewDownloadURIFromFile(&genai.File{DownloadURI: done.Dest.FileName}), nil)
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	lines := map[string]struct {
		Response *genai.GenerateContentResponse
		Error    *genai.JobError
	}{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var v struct {
			Key      string
			Response *genai.GenerateContentResponse
			Error    *genai.JobError
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		lines[v.Key] = struct {
			Response *genai.GenerateContentResponse
			Error    *genai.JobError
		}{v.Response, v.Error}
	}
	if a := lines["a"]; a.Response == nil || a.Response.Text() != "fake answer to: first" {
		t.Errorf("line a: %+v", a)
	}
	if b := lines["b"]; b.Error == nil || b.Error.Message != "boom" {
		t.Errorf("line b: %+v", b)
	}
	for _, name := range []string{f.Name, done.Dest.FileName} {
		if _, err := c.Files.Delete(ctx, name, nil); err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
	if _, err := c.Batches.Delete(ctx, job.Name, nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if live := srv.Live()["gemini"]; len(live) != 0 {
		t.Errorf("left behind: %v", live)
	}
}
