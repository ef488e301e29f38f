package vendor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

// openaiEndpoint is the endpoint every batch line targets.
const openaiEndpoint = "/v1/chat/completions"

// maxResultFile caps how much of an output or error file is read; a batch
// holds one request, so anything near this is not ours to parse.
const maxResultFile = 64 << 20

// OpenAI speaks the Files + Batches API.
type OpenAI struct {
	base string
	hc   *http.Client
}

// NewOpenAI returns the adapter; an empty base URL is the SDK default.
func NewOpenAI(baseURL string, hc *http.Client) *OpenAI {
	return &OpenAI{base: baseURL, hc: hc}
}

// Provider implements Adapter.
func (*OpenAI) Provider() batchv1.Provider { return batchv1.Provider_PROVIDER_OPENAI }

func (o *OpenAI) client(key string) openai.Client {
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithHTTPClient(o.hc), option.WithMaxRetries(0)}
	if o.base != "" {
		opts = append(opts, option.WithBaseURL(withSlash(o.base)))
	}
	return openai.NewClient(opts...)
}

func openaiErr(op string, err error) error {
	if err == nil {
		return nil
	}
	e := &Error{Provider: "openai", Op: op, Err: err}
	var api *openai.Error
	if errors.As(err, &api) {
		e.HTTPStatus = api.StatusCode
	}
	return e
}

// Submit implements Adapter: upload a one-line JSONL input file, then
// create the batch on it. Structured output is the line's response_format.
func (o *OpenAI) Submit(ctx context.Context, key string, req Request) (string, error) {
	schema, err := schemaMap(req.OutputSchema)
	if err != nil {
		return "", err
	}
	body := openai.ChatCompletionNewParams{
		Model:               req.Model,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage(req.Prompt)},
		MaxCompletionTokens: openai.Int(req.MaxTokens),
	}
	if schema != nil {
		body.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "output", Schema: schema}}}
	}
	line, err := json.Marshal(map[string]any{"custom_id": req.CustomID, "method": "POST", "url": openaiEndpoint, "body": body})
	if err != nil {
		return "", fmt.Errorf("openai submit: encode input line: %w", err)
	}
	c := o.client(key)
	f, err := c.Files.New(ctx, openai.FileNewParams{
		File:    openai.File(bytes.NewReader(append(line, '\n')), req.CustomID+".jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		return "", openaiErr("submit (upload input)", err)
	}
	b, err := c.Batches.New(ctx, openai.BatchNewParams{
		InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
		// Says whose batch it is before it ends (see outcome).
		Metadata: shared.Metadata{openaiRunKey: req.CustomID},
	})
	if err != nil {
		// Leave nothing behind for a batch that never existed.
		_, _ = c.Files.Delete(context.WithoutCancel(ctx), f.ID)
		return "", openaiErr("submit", err)
	}
	return b.ID, nil
}

// Poll implements Adapter.
func (o *OpenAI) Poll(ctx context.Context, key string, ref Ref) (Outcome, error) {
	c := o.client(key)
	b, err := c.Batches.Get(ctx, ref.ID)
	if err != nil {
		return Outcome{}, openaiErr("poll", err)
	}
	return o.outcome(ctx, &c, b, ref)
}

func openaiEnded(s openai.BatchStatus) bool {
	switch s {
	case openai.BatchStatusCompleted, openai.BatchStatusFailed, openai.BatchStatusExpired, openai.BatchStatusCancelled:
		return true
	}
	return false
}

// openaiRunKey is the batch metadata key holding the request id.
const openaiRunKey = "agentplane_custom_id"

// outcome reads the output file, then the error file, for the request's
// line; a batch that failed validation has neither and says why in errors.
// The batch's metadata and its files' lines must carry the request id
// asked for: another one is another run's batch.
func (o *OpenAI) outcome(ctx context.Context, c *openai.Client, b *openai.Batch, ref Ref) (Outcome, error) {
	status := string(b.Status)
	id, tagged := b.Metadata[openaiRunKey]
	if tagged && !ref.Matches(id) {
		return Outcome{}, otherRun("openai", ref.ID)
	}
	if !openaiEnded(b.Status) {
		out := pending(status)
		out.Owned = tagged
		return out, nil
	}
	others := false
	for _, fid := range []string{b.OutputFileID, b.ErrorFileID} {
		if fid == "" {
			continue
		}
		data, err := o.download(ctx, c, fid)
		if err != nil {
			return Outcome{}, err
		}
		l, ok, other := findOpenAILine(data, ref)
		if ok {
			out := openaiLineOutcome(status, ref, l)
			out.Owned = true
			return out, nil
		}
		others = others || other
	}
	if others {
		return Outcome{}, otherRun("openai", ref.ID)
	}
	msg := fmt.Sprintf("openai batch %s ended %s without a result", ref.ID, status)
	if b.Errors.Data != nil {
		var parts []string
		for _, e := range b.Errors.Data {
			parts = append(parts, strings.TrimSpace(e.Code+": "+e.Message))
		}
		if len(parts) > 0 {
			msg = fmt.Sprintf("openai batch %s %s: %s", ref.ID, status, strings.Join(parts, "; "))
		}
	}
	return failed(status, msg), nil
}

func (o *OpenAI) download(ctx context.Context, c *openai.Client, fileID string) ([]byte, error) {
	resp, err := c.Files.Content(ctx, fileID)
	if err != nil {
		return nil, openaiErr("results", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResultFile))
	if err != nil {
		return nil, openaiErr("results", err)
	}
	return data, nil
}

// Cancel implements Adapter. OpenAI answers 409 for a batch that already
// ended; that batch is then read for how it ended.
func (o *OpenAI) Cancel(ctx context.Context, key string, ref Ref) (Outcome, error) {
	c := o.client(key)
	b, err := c.Batches.Cancel(ctx, ref.ID)
	if err != nil {
		var api *openai.Error
		if errors.As(err, &api) && api.StatusCode == http.StatusConflict {
			return o.Poll(ctx, key, ref)
		}
		return Outcome{}, openaiErr("cancel", err)
	}
	return o.outcome(ctx, &c, b, ref)
}

// Delete implements Adapter. There is no batch delete: the input, output
// and error files go instead, once the batch ended (cancelled first when
// still running, so no output file appears afterwards).
func (o *OpenAI) Delete(ctx context.Context, key string, id string) error {
	c := o.client(key)
	b, err := c.Batches.Get(ctx, id)
	if err != nil {
		return goneIsDone(openaiErr("delete", err))
	}
	if !openaiEnded(b.Status) {
		if _, err := c.Batches.Cancel(ctx, id); err != nil && !isConflict(err) {
			return goneIsDone(openaiErr("delete (cancel first)", err))
		}
		if err := waitEnded(ctx, func() (bool, error) {
			nb, err := c.Batches.Get(ctx, id)
			if err != nil {
				return false, openaiErr("delete (wait for cancel)", err)
			}
			b = nb
			return openaiEnded(nb.Status), nil
		}); err != nil {
			return goneIsDone(err)
		}
	}
	var errs []error
	for _, fid := range []string{b.InputFileID, b.OutputFileID, b.ErrorFileID} {
		if fid == "" {
			continue
		}
		if _, err := c.Files.Delete(ctx, fid); err != nil {
			if err := goneIsDone(openaiErr("delete file "+fid, err)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func isConflict(err error) bool {
	var api *openai.Error
	return errors.As(err, &api) && api.StatusCode == http.StatusConflict
}
