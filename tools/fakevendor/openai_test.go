package fakevendor_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentplane/agentplane/tools/fakevendor"
)

func openaiClient(base, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// openaiLine is one line of a batch output or error file.
type openaiLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func chatLine(t *testing.T, id, prompt string, schema map[string]any) []byte {
	t.Helper()
	body := openai.ChatCompletionNewParams{Model: "gpt-5", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
	if schema != nil {
		body.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "out", Schema: schema}}}
	}
	return batchLine(t, id, "/v1/chat/completions", body)
}

func responsesLine(t *testing.T, id, prompt string, schema map[string]any) []byte {
	t.Helper()
	body := responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}}
	if schema != nil {
		body.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "out", Schema: schema}}}
	}
	return batchLine(t, id, "/v1/responses", body)
}

func batchLine(t *testing.T, id, url string, body any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"custom_id": id, "method": "POST", "url": url, "body": body})
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func openaiSubmit(t *testing.T, c openai.Client, endpoint openai.BatchNewParamsEndpoint, jsonl []byte) *openai.Batch {
	t.Helper()
	ctx := context.Background()
	f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(bytes.NewReader(jsonl), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	b, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: endpoint, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return b
}

func openaiSubmitRaw(t *testing.T, c openai.Client, jsonl string) *openai.Batch {
	t.Helper()
	return openaiSubmit(t, c, openai.BatchNewParamsEndpointV1ChatCompletions, []byte(jsonl))
}

func openaiPoll(t *testing.T, c openai.Client, id string) (*openai.Batch, int) {
	t.Helper()
	for n := 1; n <= 100; n++ {
		b, err := c.Batches.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		switch b.Status {
		case openai.BatchStatusCompleted, openai.BatchStatusFailed, openai.BatchStatusExpired, openai.BatchStatusCancelled:
			return b, n
		}
	}
	t.Fatalf("batch %s never ended", id)
	return nil, 0
}

func openaiFile(t *testing.T, c openai.Client, id string) map[string]openaiLine {
	t.Helper()
	out := map[string]openaiLine{}
	if id == "" {
		return out
	}
	resp, err := c.Files.Content(context.Background(), id)
	if err != nil {
		t.Fatalf("content %s: %v", id, err)
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l openaiLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out[l.CustomID] = l
	}
	return out
}

func TestOpenAIBatchResultsFollowPrompts(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}, "why": map[string]any{"type": "string"}}}
	cases := []struct {
		name     string
		endpoint openai.BatchNewParamsEndpoint
		line     func(*testing.T, string, string, map[string]any) []byte
		text     func(json.RawMessage) (string, error)
	}{
		{"chat completions", openai.BatchNewParamsEndpointV1ChatCompletions, chatLine, func(b json.RawMessage) (string, error) {
			var cc openai.ChatCompletion
			if err := json.Unmarshal(b, &cc); err != nil || len(cc.Choices) != 1 {
				return "", errors.Join(err, errors.New("want one choice"))
			}
			return cc.Choices[0].Message.Content, nil
		}},
		{"responses", openai.BatchNewParamsEndpointV1Responses, responsesLine, func(b json.RawMessage) (string, error) {
			var r responses.Response
			err := json.Unmarshal(b, &r)
			return r.OutputText(), err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, base := start(t, fakevendor.Options{PollsUntilEnded: 2, ErrorMessage: "boom"})
			c := openaiClient(base, testKey)
			in := append(append(tc.line(t, "plain", "say hi", nil), tc.line(t, "schema", "judge", schema)...), tc.line(t, "bad", "FAKEVENDOR_FAIL now", nil)...)
			b := openaiSubmit(t, c, tc.endpoint, in)
			if b.Status != openai.BatchStatusValidating {
				t.Errorf("new batch status %q", b.Status)
			}
			done, polls := openaiPoll(t, c, b.ID)
			if done.Status != openai.BatchStatusCompleted || polls != 2 || srv.BatchCalls(b.ID) != 2 {
				t.Fatalf("status %q after %d polls (%d counted)", done.Status, polls, srv.BatchCalls(b.ID))
			}
			if done.RequestCounts.Total != 3 || done.RequestCounts.Completed != 2 || done.RequestCounts.Failed != 1 {
				t.Errorf("counts %+v", done.RequestCounts)
			}
			out, errs := openaiFile(t, c, done.OutputFileID), openaiFile(t, c, done.ErrorFileID)
			want := map[string]string{"plain": "fake answer to: say hi", "schema": `{"ok":false,"why":"fake answer to: judge"}`}
			for id, w := range want {
				l, ok := out[id]
				if !ok || l.Response == nil || l.Response.StatusCode != 200 {
					t.Fatalf("output line %s: %+v", id, l)
				}
				got, err := tc.text(l.Response.Body)
				if err != nil || got != w {
					t.Errorf("%s: text %q (%v), want %q", id, got, err, w)
				}
			}
			bad, ok := errs["bad"]
			if !ok || bad.Response == nil || bad.Response.StatusCode != 400 {
				t.Fatalf("error line: %+v", bad)
			}
			var e struct{ Error struct{ Message string } }
			if err := json.Unmarshal(bad.Response.Body, &e); err != nil || e.Error.Message != "boom" {
				t.Errorf("error message %q (%v)", e.Error.Message, err)
			}
			for _, id := range []string{done.InputFileID, done.OutputFileID, done.ErrorFileID} {
				if d, err := c.Files.Delete(context.Background(), id); err != nil || !d.Deleted {
					t.Fatalf("delete %s: %v", id, err)
				}
			}
			if live := srv.Live()["openai"]; len(live) != 0 {
				t.Errorf("left behind: %v", live)
			}
		})
	}
}

func TestOpenAIBatchLifecycle(t *testing.T) {
	cases := []struct {
		name      string
		opts      fakevendor.Options
		cancel    bool
		input     string
		want      openai.BatchStatus
		wantError string // code on the error-file line, or in errors.data for a failed batch
	}{
		{"cancel goes through cancelling to cancelled", fakevendor.Options{Outcome: fakevendor.OutcomeNever}, true, "", openai.BatchStatusCancelled, "batch_cancelled"},
		{"expiry leaves batch_expired lines", fakevendor.Options{Outcome: fakevendor.OutcomeExpire}, false, "", openai.BatchStatusExpired, "batch_expired"},
		{"a scripted failure fails the batch", fakevendor.Options{Outcome: fakevendor.OutcomeFail}, false, "", openai.BatchStatusFailed, "batch_failed"},
		{"malformed input JSONL fails validation", fakevendor.Options{}, false, "{not json\n", openai.BatchStatusFailed, "invalid_json_line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, base := start(t, tc.opts)
			c := openaiClient(base, testKey)
			in := chatLine(t, "r1", "hello", nil)
			if tc.input != "" {
				in = []byte(tc.input)
			}
			b := openaiSubmit(t, c, openai.BatchNewParamsEndpointV1ChatCompletions, in)
			if tc.cancel {
				cb, err := c.Batches.Cancel(context.Background(), b.ID)
				if err != nil || cb.Status != openai.BatchStatusCancelling {
					t.Fatalf("cancel: %v %+v", err, cb)
				}
			}
			done, _ := openaiPoll(t, c, b.ID)
			if done.Status != tc.want {
				t.Fatalf("status %q, want %q", done.Status, tc.want)
			}
			if done.Status == openai.BatchStatusFailed {
				if len(done.Errors.Data) == 0 || done.Errors.Data[0].Code != tc.wantError {
					t.Errorf("errors %+v, want code %s", done.Errors.Data, tc.wantError)
				}
				return
			}
			if l := openaiFile(t, c, done.ErrorFileID)["r1"]; l.Error == nil || l.Error.Code != tc.wantError {
				t.Errorf("error line %+v, want %s", l, tc.wantError)
			}
			page, err := c.Batches.List(context.Background(), openai.BatchListParams{Limit: openai.Int(10)})
			if err != nil || len(page.Data) != 1 || page.Data[0].ID != b.ID {
				t.Errorf("list: %v %+v", err, page)
			}
		})
	}
}

func TestOpenAIRejectsWrongAPIKey(t *testing.T) {
	_, base := start(t, fakevendor.Options{})
	c := openaiClient(base, "wrong")
	_, err := c.Batches.Get(context.Background(), "batch_x")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_api_key" {
		t.Fatalf("err = %v, want 401 invalid_api_key", err)
	}
}

func TestOpenAIBatchOnMissingFileIsNotFound(t *testing.T) {
	_, base := start(t, fakevendor.Options{})
	c := openaiClient(base, testKey)
	_, err := c.Batches.New(context.Background(), openai.BatchNewParams{InputFileID: "file-missing",
		Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("err = %v, want 404", err)
	}
}
