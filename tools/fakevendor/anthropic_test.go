package fakevendor_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentplane/agentplane/tools/fakevendor"
)

func anthropicClient(base, key string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

func anthropicRequest(id, prompt string, schema map[string]any) anthropic.MessageBatchNewParamsRequest {
	p := anthropic.MessageBatchNewParamsRequestParams{
		Model: "claude-opus-5-5", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	}
	if schema != nil {
		p.OutputConfig = anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: schema}}
	}
	return anthropic.MessageBatchNewParamsRequest{CustomID: id, Params: p}
}

// anthropicPoll reads the batch until it has ended and returns it with the
// number of reads it took.
func anthropicPoll(t *testing.T, c anthropic.Client, id string) (*anthropic.MessageBatch, int) {
	t.Helper()
	for n := 1; n <= 100; n++ {
		b, err := c.Messages.Batches.Get(context.Background(), id, anthropic.MessageBatchGetParams{})
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if b.ProcessingStatus == anthropic.MessageBatchProcessingStatusEnded {
			return b, n
		}
	}
	t.Fatalf("batch %s never ended", id)
	return nil, 0
}

func anthropicResults(t *testing.T, c anthropic.Client, id string) map[string]anthropic.MessageBatchIndividualResponse {
	t.Helper()
	st := c.Messages.Batches.ResultsStreaming(context.Background(), id, anthropic.MessageBatchResultsParams{})
	defer func() { _ = st.Close() }()
	out := map[string]anthropic.MessageBatchIndividualResponse{}
	for st.Next() {
		out[st.Current().CustomID] = st.Current()
	}
	if err := st.Err(); err != nil {
		t.Fatalf("results: %v", err)
	}
	return out
}

func TestAnthropicBatchResultsFollowPrompts(t *testing.T) {
	srv, base := start(t, fakevendor.Options{PollsUntilEnded: 3, ErrorMessage: "boom"})
	c := anthropicClient(base, testKey)
	schema := map[string]any{"type": "object", "properties": map[string]any{"summary": map[string]any{"type": "string"}}}
	cases := []struct {
		name, id, prompt string
		schema           map[string]any
		wantType         string
		wantText         string
	}{
		{"plain prompt succeeds with a deterministic answer", "plain", "say hi", nil, "succeeded", "fake answer to: say hi"},
		{"structured output returns JSON in the schema", "schema", "sum up", schema, "succeeded", `{"summary":"fake answer to: sum up"}`},
		{"marker in the prompt errors with the configured message", "bad", "please FAKEVENDOR_FAIL", nil, "errored", "boom"},
	}
	var reqs []anthropic.MessageBatchNewParamsRequest
	for _, tc := range cases {
		reqs = append(reqs, anthropicRequest(tc.id, tc.prompt, tc.schema))
	}
	b, err := c.Messages.Batches.New(context.Background(), anthropic.MessageBatchNewParams{Requests: reqs})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if b.ProcessingStatus != anthropic.MessageBatchProcessingStatusInProgress || b.RequestCounts.Processing != int64(len(cases)) {
		t.Fatalf("new batch: status %q processing %d", b.ProcessingStatus, b.RequestCounts.Processing)
	}
	ended, polls := anthropicPoll(t, c, b.ID)
	if polls != 3 || srv.Calls("GET /v1/messages/batches/{id}") != 3 {
		t.Errorf("ended after %d polls (%d counted), want 3", polls, srv.Calls("GET /v1/messages/batches/{id}"))
	}
	if ended.RequestCounts.Succeeded != 2 || ended.RequestCounts.Errored != 1 || ended.EndedAt.IsZero() {
		t.Errorf("ended batch counts %+v, ended_at %v", ended.RequestCounts, ended.EndedAt)
	}
	results := anthropicResults(t, c, b.ID)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := results[tc.id]
			if !ok {
				t.Fatalf("no result for %s", tc.id)
			}
			switch v := r.Result.AsAny().(type) {
			case anthropic.MessageBatchSucceededResult:
				if tc.wantType != "succeeded" {
					t.Fatalf("got succeeded, want %s", tc.wantType)
				}
				if len(v.Message.Content) != 1 || v.Message.Content[0].Text != tc.wantText {
					t.Errorf("text = %+v, want %q", v.Message.Content, tc.wantText)
				}
				if v.Message.Model != "claude-opus-5-5" || v.Message.StopReason != anthropic.StopReasonEndTurn || v.Message.Usage.OutputTokens == 0 {
					t.Errorf("message = model %q stop %q usage %+v", v.Message.Model, v.Message.StopReason, v.Message.Usage)
				}
				if tc.schema != nil && !json.Valid([]byte(v.Message.Content[0].Text)) {
					t.Errorf("structured answer is not JSON: %s", v.Message.Content[0].Text)
				}
			case anthropic.MessageBatchErroredResult:
				if tc.wantType != "errored" || v.Error.Error.Message != tc.wantText {
					t.Errorf("errored %q (%s), want %s %q", v.Error.Error.Message, v.Error.Error.Type, tc.wantType, tc.wantText)
				}
			default:
				t.Errorf("result type %T", v)
			}
		})
	}
	del, err := c.Messages.Batches.Delete(context.Background(), b.ID, anthropic.MessageBatchDeleteParams{})
	if err != nil || del.ID != b.ID {
		t.Fatalf("delete: %v %+v", err, del)
	}
	if live := srv.Live()["anthropic"]; len(live) != 0 {
		t.Errorf("left behind: %v", live)
	}
}

func TestAnthropicBatchLifecycle(t *testing.T) {
	cases := []struct {
		name     string
		opts     fakevendor.Options
		cancel   bool
		wantType string
	}{
		{"cancel ends an unfinished batch with canceled results", fakevendor.Options{Outcome: fakevendor.OutcomeNever}, true, "canceled"},
		{"expiry ends the batch with expired results", fakevendor.Options{Outcome: fakevendor.OutcomeExpire}, false, "expired"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, base := start(t, tc.opts)
			c := anthropicClient(base, testKey)
			ctx := context.Background()
			b, err := c.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{
				Requests: []anthropic.MessageBatchNewParamsRequest{anthropicRequest("r1", "hello", nil)}})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			_, err = c.Messages.Batches.Delete(ctx, b.ID, anthropic.MessageBatchDeleteParams{})
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
				t.Fatalf("delete while in progress: %v, want 400", err)
			}
			if tc.cancel {
				cb, err := c.Messages.Batches.Cancel(ctx, b.ID, anthropic.MessageBatchCancelParams{})
				if err != nil || cb.ProcessingStatus != anthropic.MessageBatchProcessingStatusCanceling || cb.CancelInitiatedAt.IsZero() {
					t.Fatalf("cancel: %v %+v", err, cb)
				}
			}
			anthropicPoll(t, c, b.ID)
			if got := anthropicResults(t, c, b.ID)["r1"].Result.Type; got != tc.wantType {
				t.Errorf("result type %q, want %q", got, tc.wantType)
			}
			page, err := c.Messages.Batches.List(ctx, anthropic.MessageBatchListParams{Limit: anthropic.Int(10)})
			if err != nil || len(page.Data) != 1 || page.Data[0].ID != b.ID {
				t.Fatalf("list: %v %+v", err, page)
			}
			if _, err := c.Messages.Batches.Delete(ctx, b.ID, anthropic.MessageBatchDeleteParams{}); err != nil {
				t.Fatalf("delete: %v", err)
			}
			_, err = c.Messages.Batches.Get(ctx, b.ID, anthropic.MessageBatchGetParams{})
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
				t.Errorf("get after delete: %v, want 404", err)
			}
		})
	}
}

func TestAnthropicRejectsWrongAPIKey(t *testing.T) {
	_, base := start(t, fakevendor.Options{})
	c := anthropicClient(base, "wrong")
	_, err := c.Messages.Batches.New(context.Background(), anthropic.MessageBatchNewParams{
		Requests: []anthropic.MessageBatchNewParamsRequest{anthropicRequest("r1", "hello", nil)}})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("err = %v, want 401", err)
	}
	if apiErr.Type() != "authentication_error" {
		t.Errorf("error type %q", apiErr.Type())
	}
}

func TestAnthropicDeleteFailureIsScriptable(t *testing.T) {
	_, base := start(t, fakevendor.Options{FailDeletes: true})
	c := anthropicClient(base, testKey)
	ctx := context.Background()
	b, err := c.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{
		Requests: []anthropic.MessageBatchNewParamsRequest{anthropicRequest("r1", "hello", nil)}})
	if err != nil {
		t.Fatal(err)
	}
	anthropicPoll(t, c, b.ID)
	_, err = c.Messages.Batches.Delete(ctx, b.ID, anthropic.MessageBatchDeleteParams{})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusInternalServerError {
		t.Fatalf("delete: %v, want 500", err)
	}
}

func TestDelayKeepsBatchesProcessingUntilReconfigured(t *testing.T) {
	srv, base := start(t, fakevendor.Options{Delay: time.Hour})
	c := anthropicClient(base, testKey)
	ctx := context.Background()
	newBatch := func() string {
		b, err := c.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{
			Requests: []anthropic.MessageBatchNewParamsRequest{anthropicRequest("r1", "hello", nil)}})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		return b.ID
	}
	slow := newBatch()
	for range 4 {
		b, err := c.Messages.Batches.Get(ctx, slow, anthropic.MessageBatchGetParams{})
		if err != nil || b.ProcessingStatus != anthropic.MessageBatchProcessingStatusInProgress {
			t.Fatalf("get: %v %+v", err, b)
		}
	}
	// Options are snapshotted per batch: only batches created after
	// Configure see the new delay.
	srv.Configure(func(o *fakevendor.Options) { o.Delay = 0 })
	anthropicPoll(t, c, newBatch())
	b, err := c.Messages.Batches.Get(ctx, slow, anthropic.MessageBatchGetParams{})
	if err != nil || b.ProcessingStatus != anthropic.MessageBatchProcessingStatusInProgress {
		t.Errorf("old batch: %v %+v, want still in progress", err, b)
	}
	if n := srv.BatchCalls(slow); n != 5 {
		t.Errorf("BatchCalls = %d, want 5", n)
	}
}
