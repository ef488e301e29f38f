// Package vendor talks to the three vendor batch APIs through their
// official Go SDKs. Each provider is one Adapter; the rest of batch-poller
// sees only the Adapter interface and the Outcome it reports.
package vendor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"

	"github.com/agentplane/agentplane/libs/vendors"
)

// Request is one batch run's prompt as an adapter submits it.
type Request struct {
	// CustomID names the single request inside the batch (see CustomID).
	CustomID string
	// Model to run.
	Model string
	// Prompt is the rendered prompt.
	Prompt string
	// MaxTokens caps the answer.
	MaxTokens int64
	// OutputSchema is a JSON Schema as JSON text; empty for free text.
	OutputSchema string
}

// Ref names a submitted batch for Poll.
type Ref struct {
	// ID is the vendor's batch id.
	ID string
	// CustomID is the request's id inside the batch, to pick its result.
	CustomID string
	// LegacyCustomID is the id the run's request had before the namespace
	// was part of it (LegacyCustomID); empty accepts only CustomID.
	LegacyCustomID string
	// CLI is the vendor CLI (vendors.NameClaude, ...) whose event lines the
	// answer is written as.
	CLI string
}

// Outcome is what a poll learnt about a batch.
type Outcome struct {
	// State is PENDING, SUCCEEDED or FAILED.
	State batchv1.State
	// VendorStatus is the vendor's own status word.
	VendorStatus string
	// Lines are the CLI event lines of the answer, once it ended with one.
	Lines []string
	// FailureMessage says why a FAILED batch failed.
	FailureMessage string
	// Owned: the vendor showed the batch carries the request id asked
	// for (Ref.CustomID), so it is the run's.
	Owned bool
}

// Ended reports whether the batch will not change any more.
func (o Outcome) Ended() bool {
	return o.State == batchv1.State_STATE_SUCCEEDED || o.State == batchv1.State_STATE_FAILED
}

// Adapter is one vendor's batch API. Every call takes the API key, which
// comes from the run's namespace, so one adapter serves every tenant.
type Adapter interface {
	// Provider is the vendor batch API this adapter speaks.
	Provider() batchv1.Provider
	// Submit creates a batch of one request and returns its id.
	Submit(ctx context.Context, key string, req Request) (string, error)
	// Poll reads the batch's status and, once it ended, its result.
	Poll(ctx context.Context, key string, ref Ref) (Outcome, error)
	// Cancel asks the vendor to stop the batch and reports where it stands;
	// a batch that already ended reports how it ended.
	Cancel(ctx context.Context, key string, ref Ref) (Outcome, error)
	// Delete removes what the batch left at the vendor; what is already
	// gone is not an error.
	Delete(ctx context.Context, key string, id string) error
}

// Error is a failed vendor call. HTTPStatus is the vendor's answer, or 0
// when the call never got one (transport error, timeout).
type Error struct {
	// Provider is "anthropic", "openai" or "gemini".
	Provider string
	// Op is what was being done (submit, poll, results, cancel, delete).
	Op string
	// HTTPStatus is the vendor's status code; 0 when there was no answer.
	HTTPStatus int
	// Err is the SDK's error.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Provider, e.Op, e.Err)
}

// Unwrap gives the SDK's error.
func (e *Error) Unwrap() error { return e.Err }

// ErrOtherRun is returned by Poll and Cancel when the vendor shows the
// batch carries another request id than Ref.CustomID: it was submitted
// for another run, and nothing of it is the asking run's.
var ErrOtherRun = errors.New("the batch was submitted for another run")

// otherRun is ErrOtherRun for the batch id.
func otherRun(provider, id string) error {
	return fmt.Errorf("%s batch %s: %w", provider, id, ErrOtherRun)
}

// IsNotFound reports whether err is a vendor 404: the object is gone.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.HTTPStatus == http.StatusNotFound
}

// ProviderName is the provider's lowercase name, as BatchEvent.provider
// and agents' status.batchProvider spell it.
func ProviderName(p batchv1.Provider) string {
	switch p {
	case batchv1.Provider_PROVIDER_ANTHROPIC:
		return "anthropic"
	case batchv1.Provider_PROVIDER_OPENAI:
		return "openai"
	case batchv1.Provider_PROVIDER_GEMINI:
		return "gemini"
	}
	return "unknown"
}

// ProviderFor returns the batch API of the vendor CLI a model routes to,
// and false for vendors without one (opencode, exec).
func ProviderFor(cli string) (batchv1.Provider, bool) {
	switch cli {
	case vendors.NameClaude:
		return batchv1.Provider_PROVIDER_ANTHROPIC, true
	case vendors.NameCodex:
		return batchv1.Provider_PROVIDER_OPENAI, true
	case vendors.NameGemini:
		return batchv1.Provider_PROVIDER_GEMINI, true
	}
	return batchv1.Provider_PROVIDER_UNSPECIFIED, false
}

// CLIFor is the CLI whose lines a provider's answers are written as when
// the caller did not say which model the batch ran.
func CLIFor(p batchv1.Provider) string {
	switch p {
	case batchv1.Provider_PROVIDER_OPENAI:
		return vendors.NameCodex
	case batchv1.Provider_PROVIDER_GEMINI:
		return vendors.NameGemini
	}
	return vendors.NameClaude
}

// Matches reports whether a request id the vendor shows is the run's.
func (r Ref) Matches(id string) bool {
	return id == r.CustomID || (r.LegacyCustomID != "" && id == r.LegacyCustomID)
}

var notCustomIDChar = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// CustomID derives the request id from the run: a hash of its namespace
// and its uid, so the id names one run of one namespace and the vendor's
// answer can be checked against the run asking (see the tracker's
// owner.go). It satisfies the strictest vendor rule (Anthropic:
// ^[a-zA-Z0-9_-]{1,64}$; a Kubernetes uid fits whole) and is the same
// after a restart, so a re-tracked batch finds its result.
func CustomID(namespace, uid string) string {
	sum := sha256.Sum256([]byte(namespace))
	return capID("run-" + hex.EncodeToString(sum[:])[:12] + "-" + notCustomIDChar.ReplaceAllString(uid, "_"))
}

// LegacyCustomID is the request id of batches submitted before the
// namespace was part of it: the uid alone. A re-tracked batch carrying it
// is still the run's, so batches in flight across an upgrade keep their
// result.
func LegacyCustomID(uid string) string {
	return capID("run-" + notCustomIDChar.ReplaceAllString(uid, "_"))
}

func capID(id string) string {
	if len(id) > 64 {
		id = id[:64]
	}
	return id
}

// schemaMap decodes output_schema; nil when empty.
func schemaMap(schema string) (map[string]any, error) {
	if schema == "" {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(schema), &m); err != nil {
		return nil, fmt.Errorf("output_schema is not a JSON object: %w", err)
	}
	return m, nil
}

// answerLines writes an answer or a failed request as CLI lines; a
// failure to build them is a bug, reported as the run's failure.
func answerLines(cli string, r vendors.BatchResponse) []string {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	lines, err := vendors.BatchLines(cli, r)
	if err != nil {
		return nil
	}
	return lines
}

// succeeded is the Outcome of an answered request.
func succeeded(status, cli string, r vendors.BatchResponse) Outcome {
	return Outcome{State: batchv1.State_STATE_SUCCEEDED, VendorStatus: status, Lines: answerLines(cli, r)}
}

// failedRequest is the Outcome of a request the vendor answered with an
// error: the CLI lines carry it too, as the CLI would have printed it.
func failedRequest(status, cli string, r vendors.BatchResponse) Outcome {
	r.IsError = true
	return Outcome{State: batchv1.State_STATE_FAILED, VendorStatus: status, Lines: answerLines(cli, r), FailureMessage: r.ErrorMessage}
}

// failed is the Outcome of a batch that ended without an answer.
func failed(status, msg string) Outcome {
	return Outcome{State: batchv1.State_STATE_FAILED, VendorStatus: status, FailureMessage: msg}
}

// pending is the Outcome of a batch still in flight.
func pending(status string) Outcome {
	return Outcome{State: batchv1.State_STATE_PENDING, VendorStatus: status}
}
