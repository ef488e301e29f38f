package vendor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/genai"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

// Gemini speaks the Gemini Developer API batch mode, with the request
// inlined in the batch (one request is far below the inline size limit).
type Gemini struct {
	base string
	hc   *http.Client
}

// NewGemini returns the adapter; an empty base URL is the SDK default.
func NewGemini(baseURL string, hc *http.Client) *Gemini {
	return &Gemini{base: baseURL, hc: hc}
}

// Provider implements Adapter.
func (*Gemini) Provider() batchv1.Provider { return batchv1.Provider_PROVIDER_GEMINI }

func (g *Gemini) client(ctx context.Context, key string) (*genai.Client, error) {
	cfg := &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI, HTTPClient: g.hc}
	if g.base != "" {
		cfg.HTTPOptions.BaseURL = withSlash(g.base)
	}
	c, err := genai.NewClient(ctx, cfg)
	if err != nil {
		return nil, &Error{Provider: "gemini", Op: "client", Err: err}
	}
	return c, nil
}

func geminiErr(op string, err error) error {
	if err == nil {
		return nil
	}
	e := &Error{Provider: "gemini", Op: op, Err: err}
	var api genai.APIError
	var apiPtr *genai.APIError
	switch {
	case errors.As(err, &api):
		e.HTTPStatus = api.Code
	case errors.As(err, &apiPtr):
		e.HTTPStatus = apiPtr.Code
	}
	return e
}

// Submit implements Adapter. Structured output is responseMimeType
// application/json with responseJsonSchema (real JSON Schema, not the
// OpenAPI subset of responseSchema).
func (g *Gemini) Submit(ctx context.Context, key string, req Request) (string, error) {
	schema, err := schemaMap(req.OutputSchema)
	if err != nil {
		return "", err
	}
	c, err := g.client(ctx, key)
	if err != nil {
		return "", err
	}
	cfg := &genai.GenerateContentConfig{}
	if req.MaxTokens > 0 {
		cfg.MaxOutputTokens = int32(min(req.MaxTokens, 1<<31-1))
	}
	if schema != nil {
		cfg.ResponseMIMEType, cfg.ResponseJsonSchema = "application/json", schema
	}
	job, err := c.Batches.Create(ctx, req.Model, &genai.BatchJobSource{InlinedRequests: []*genai.InlinedRequest{{
		Contents: genai.Text(req.Prompt), Metadata: map[string]string{"key": req.CustomID}, Config: cfg,
	}}}, &genai.CreateBatchJobConfig{DisplayName: req.CustomID})
	if err != nil {
		return "", geminiErr("submit", err)
	}
	return job.Name, nil
}

// Poll implements Adapter.
func (g *Gemini) Poll(ctx context.Context, key string, ref Ref) (Outcome, error) {
	c, err := g.client(ctx, key)
	if err != nil {
		return Outcome{}, err
	}
	job, err := c.Batches.Get(ctx, ref.ID, nil)
	if err != nil {
		return Outcome{}, geminiErr("poll", err)
	}
	return geminiOutcome(job, ref)
}

func geminiEnded(s genai.JobState) bool {
	switch s {
	case genai.JobStateSucceeded, genai.JobStateFailed, genai.JobStateCancelled, genai.JobStateExpired,
		genai.JobStatePartiallySucceeded:
		return true
	}
	return false
}

// geminiOutcome maps a job; the answers come inlined in the job itself, so
// no second call is needed. The job's display name and its response's
// metadata carry the request id (Submit): another one is another run's
// batch.
func geminiOutcome(job *genai.BatchJob, ref Ref) (Outcome, error) {
	status := string(job.State)
	if job.DisplayName != "" && !ref.Matches(job.DisplayName) {
		return Outcome{}, otherRun("gemini", ref.ID)
	}
	owned := job.DisplayName != ""
	if !geminiEnded(job.State) {
		out := pending(status)
		out.Owned = owned
		return out, nil
	}
	if job.Dest != nil && len(job.Dest.InlinedResponses) > 0 {
		for _, r := range job.Dest.InlinedResponses {
			if r == nil {
				continue
			}
			if k, ok := r.Metadata["key"]; ok && !ref.Matches(k) {
				return Outcome{}, otherRun("gemini", ref.ID)
			}
			out := geminiResponseOutcome(status, ref, job, r)
			out.Owned = true
			return out, nil
		}
	}
	word := strings.ToLower(strings.TrimPrefix(status, "JOB_STATE_"))
	msg := fmt.Sprintf("gemini batch %s ended %s without a result", ref.ID, word)
	if job.Error != nil && job.Error.Message != "" {
		msg = fmt.Sprintf("gemini batch %s %s: %s", ref.ID, word, job.Error.Message)
	}
	out := failed(status, msg)
	out.Owned = owned
	return out, nil
}

// geminiResponseOutcome maps one inlined response.
func geminiResponseOutcome(status string, ref Ref, job *genai.BatchJob, r *genai.InlinedResponse) Outcome {
	model := strings.TrimPrefix(job.Model, "models/")
	if r.Error != nil || r.Response == nil {
		out := respFor(ref, model, "", "", "", 0, 0, job.EndTime)
		out.ErrorMessage = "gemini: request failed"
		if r.Error != nil && r.Error.Message != "" {
			out.ErrorMessage = "gemini: " + r.Error.Message
		}
		return failedRequest(status, ref.CLI, out)
	}
	resp := r.Response
	var text strings.Builder
	stop := ""
	if len(resp.Candidates) > 0 && resp.Candidates[0] != nil {
		cand := resp.Candidates[0]
		stop = string(cand.FinishReason)
		if cand.Content != nil {
			for _, p := range cand.Content.Parts {
				if p != nil && !p.Thought {
					text.WriteString(p.Text)
				}
			}
		}
	}
	var in, out int64
	if u := resp.UsageMetadata; u != nil {
		in, out = int64(u.PromptTokenCount), int64(u.CandidatesTokenCount)
	}
	if resp.ModelVersion != "" {
		model = resp.ModelVersion
	}
	return succeeded(status, ref.CLI, respFor(ref, model, resp.ResponseID, text.String(), stop, in, out, job.EndTime))
}

// Cancel implements Adapter. The cancel call answers nothing, so the job
// is read afterwards for where it stands.
func (g *Gemini) Cancel(ctx context.Context, key string, ref Ref) (Outcome, error) {
	c, err := g.client(ctx, key)
	if err != nil {
		return Outcome{}, err
	}
	if err := c.Batches.Cancel(ctx, ref.ID, nil); err != nil {
		return Outcome{}, geminiErr("cancel", err)
	}
	job, err := c.Batches.Get(ctx, ref.ID, nil)
	if err != nil {
		return Outcome{}, geminiErr("cancel", err)
	}
	return geminiOutcome(job, ref)
}

// Delete implements Adapter: the batch (inlined results go with it),
// cancelled first when still running.
func (g *Gemini) Delete(ctx context.Context, key string, id string) error {
	c, err := g.client(ctx, key)
	if err != nil {
		return err
	}
	job, err := c.Batches.Get(ctx, id, nil)
	if err != nil {
		return goneIsDone(geminiErr("delete", err))
	}
	if !geminiEnded(job.State) {
		if err := c.Batches.Cancel(ctx, id, nil); err != nil {
			return goneIsDone(geminiErr("delete (cancel first)", err))
		}
	}
	_, err = c.Batches.Delete(ctx, id, nil)
	return goneIsDone(geminiErr("delete", err))
}
