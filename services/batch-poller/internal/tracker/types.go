// Package tracker is batch-poller's table of in-flight batches. It polls
// each batch at the vendor at most once per poll period, spread over the
// period, answers Get from the table, and publishes a notice when a batch
// ends.
package tracker

import (
	"errors"
	"time"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

// Run names the Agent a batch belongs to.
type Run struct {
	Namespace string
	Agent     string
	UID       string
	// APIKeyKey is the agent-secrets key holding the vendor API key; empty
	// means the provider's default variable name.
	APIKeyKey string
}

// Ref names a batch.
type Ref struct {
	Run      Run
	Provider batchv1.Provider
	BatchID  string
	// Model the batch was submitted with; empty writes the provider's own
	// CLI lines.
	Model string
}

// Submission is one run's prompt.
type Submission struct {
	Run          Run
	Model        string
	Prompt       string
	MaxTokens    int64
	OutputSchema string
}

// Snapshot is what the tracker last learnt about a batch.
type Snapshot struct {
	State          batchv1.State
	Lines          []string
	FailureMessage string
	VendorStatus   string
	CheckedAt      time.Time
}

// ErrNoState is wrapped by Get's error when the batch was never read
// successfully at the vendor; the wrapped vendor error says why.
var ErrNoState = errors.New("no state from the vendor yet")

// ErrGone is wrapped when the vendor no longer knows the batch (404); the
// tracker stops tracking it.
var ErrGone = errors.New("batch not found at the vendor")

// ErrNoBatchAPI is wrapped when a model routes to a vendor CLI without a
// batch API (opencode, exec).
var ErrNoBatchAPI = errors.New("model's vendor has no batch API")
