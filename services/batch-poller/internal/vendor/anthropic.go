package vendor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

// Anthropic speaks the Message Batches API.
type Anthropic struct {
	base string
	hc   *http.Client
}

// NewAnthropic returns the adapter; an empty base URL is the SDK default.
func NewAnthropic(baseURL string, hc *http.Client) *Anthropic {
	return &Anthropic{base: baseURL, hc: hc}
}

// Provider implements Adapter.
func (*Anthropic) Provider() batchv1.Provider { return batchv1.Provider_PROVIDER_ANTHROPIC }

// client is built per call because the key is per tenant; it is cheap and
// shares the HTTP client's connections. Retries are the poller's job.
func (a *Anthropic) client(key string) anthropic.Client {
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithHTTPClient(a.hc), option.WithMaxRetries(0)}
	if a.base != "" {
		opts = append(opts, option.WithBaseURL(withSlash(a.base)))
	}
	return anthropic.NewClient(opts...)
}

func anthropicErr(op string, err error) error {
	if err == nil {
		return nil
	}
	e := &Error{Provider: "anthropic", Op: op, Err: err}
	var api *anthropic.Error
	if errors.As(err, &api) {
		e.HTTPStatus = api.StatusCode
	}
	return e
}

// Submit implements Adapter. Structured output goes in
// params.output_config.format, the GA form.
func (a *Anthropic) Submit(ctx context.Context, key string, req Request) (string, error) {
	schema, err := schemaMap(req.OutputSchema)
	if err != nil {
		return "", err
	}
	p := anthropic.MessageBatchNewParamsRequestParams{
		Model: req.Model, MaxTokens: req.MaxTokens,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(req.Prompt))},
	}
	if schema != nil {
		p.OutputConfig = anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: schema}}
	}
	c := a.client(key)
	b, err := c.Messages.Batches.New(ctx, anthropic.MessageBatchNewParams{
		Requests: []anthropic.MessageBatchNewParamsRequest{{CustomID: req.CustomID, Params: p}},
	})
	if err != nil {
		return "", anthropicErr("submit", err)
	}
	return b.ID, nil
}

// Poll implements Adapter.
func (a *Anthropic) Poll(ctx context.Context, key string, ref Ref) (Outcome, error) {
	c := a.client(key)
	b, err := c.Messages.Batches.Get(ctx, ref.ID, anthropic.MessageBatchGetParams{})
	if err != nil {
		return Outcome{}, anthropicErr("poll", err)
	}
	return a.outcome(ctx, &c, b, ref)
}

// outcome turns a MessageBatch into an Outcome, fetching the results once
// it ended.
func (a *Anthropic) outcome(ctx context.Context, c *anthropic.Client, b *anthropic.MessageBatch, ref Ref) (Outcome, error) {
	status := string(b.ProcessingStatus)
	if b.ProcessingStatus != anthropic.MessageBatchProcessingStatusEnded {
		return pending(status), nil
	}
	st := c.Messages.Batches.ResultsStreaming(ctx, ref.ID, anthropic.MessageBatchResultsParams{})
	defer func() { _ = st.Close() }()
	var found *anthropic.MessageBatchIndividualResponse
	others := 0
	for st.Next() {
		r := st.Current()
		// Only our request's line: a result under another id is another
		// run's (see the tracker's owner.go).
		if ref.Matches(r.CustomID) {
			found = &r
		} else {
			others++
		}
	}
	if err := st.Err(); err != nil {
		return Outcome{}, anthropicErr("results", err)
	}
	if found == nil && others > 0 {
		return Outcome{}, otherRun("anthropic", ref.ID)
	}
	if found == nil {
		return failed(status, fmt.Sprintf("anthropic batch %s ended with no result", ref.ID)), nil
	}
	out := anthropicResult(status, ref, found, b.EndedAt)
	out.Owned = true
	return out, nil
}

// anthropicResult maps one result line to an Outcome.
func anthropicResult(status string, ref Ref, r *anthropic.MessageBatchIndividualResponse, at time.Time) Outcome {
	res := r.Result
	switch res.Type {
	case "succeeded":
		m := res.Message
		text := ""
		for _, blk := range m.Content {
			if blk.Type == "text" {
				text += blk.Text
			}
		}
		return succeeded(status, ref.CLI, respFor(ref, m.Model, m.ID, text, string(m.StopReason),
			m.Usage.InputTokens, m.Usage.OutputTokens, at))
	case "errored":
		msg := res.Error.Error.Message
		if msg == "" {
			msg = "request errored (" + res.Error.Error.Type + ")"
		}
		out := respFor(ref, "", "", "", "", 0, 0, at)
		out.ErrorMessage = "anthropic: " + msg
		return failedRequest(status, ref.CLI, out)
	case "canceled":
		return failed(status, "anthropic batch "+ref.ID+" was canceled before the request was answered")
	case "expired":
		return failed(status, "anthropic batch "+ref.ID+" expired before the request was answered")
	}
	return failed(status, fmt.Sprintf("anthropic batch %s: unknown result type %q", ref.ID, res.Type))
}

// Cancel implements Adapter. The cancel answer is the batch itself, so an
// already ended batch reports its result here.
func (a *Anthropic) Cancel(ctx context.Context, key string, ref Ref) (Outcome, error) {
	c := a.client(key)
	b, err := c.Messages.Batches.Cancel(ctx, ref.ID, anthropic.MessageBatchCancelParams{})
	if err != nil {
		return Outcome{}, anthropicErr("cancel", err)
	}
	return a.outcome(ctx, &c, b, ref)
}

// Delete implements Adapter. Anthropic refuses to delete a batch still
// processing, so it is canceled first and deleted once it ended.
func (a *Anthropic) Delete(ctx context.Context, key string, id string) error {
	c := a.client(key)
	b, err := c.Messages.Batches.Get(ctx, id, anthropic.MessageBatchGetParams{})
	if err != nil {
		return goneIsDone(anthropicErr("delete", err))
	}
	if b.ProcessingStatus != anthropic.MessageBatchProcessingStatusEnded {
		if _, err := c.Messages.Batches.Cancel(ctx, id, anthropic.MessageBatchCancelParams{}); err != nil {
			return goneIsDone(anthropicErr("delete (cancel first)", err))
		}
		if err := waitEnded(ctx, func() (bool, error) {
			b, err := c.Messages.Batches.Get(ctx, id, anthropic.MessageBatchGetParams{})
			if err != nil {
				return false, anthropicErr("delete (wait for cancel)", err)
			}
			return b.ProcessingStatus == anthropic.MessageBatchProcessingStatusEnded, nil
		}); err != nil {
			return goneIsDone(err)
		}
	}
	_, err = c.Messages.Batches.Delete(ctx, id, anthropic.MessageBatchDeleteParams{})
	return goneIsDone(anthropicErr("delete", err))
}
