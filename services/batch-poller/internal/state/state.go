// Package state is batch-poller's durable table: for each run, the batch
// it was given and whether its completion notice went out. It outlives a
// process and is shared by every replica, so a Submit retried after a
// restart, or sent to another replica, returns the run's batch instead of
// submitting a second one, and a batch's notice is published once
// (docs/batch-poller.md, "Durable state").
//
// Store is the small compare-and-set interface the tracker needs; KV keeps
// it in a NATS JetStream key-value bucket, Memory in the process (one
// replica, nothing survives a restart).
package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"regexp"
	"time"
)

// Record is what the table keeps of one run. API keys are never part of
// it: the bucket holds batch ids and run names only.
type Record struct {
	// Namespace, Agent and UID name the run.
	Namespace string `json:"namespace"`
	Agent     string `json:"agent"`
	UID       string `json:"uid"`
	// Provider is the vendor's name (anthropic, openai, gemini).
	Provider string `json:"provider,omitempty"`
	// BatchID is the vendor's batch id; empty while the submit is in
	// progress.
	BatchID string `json:"batchId,omitempty"`
	// Model the batch was submitted with.
	Model string `json:"model,omitempty"`
	// SubmittingBy and SubmittingSince claim the run's submit: the replica
	// sending it and when it started. A claim older than the submit's
	// bound belongs to a process that died mid-submit.
	SubmittingBy    string    `json:"submittingBy,omitempty"`
	SubmittingSince time.Time `json:"submittingSince,omitzero"`
	// Notified: the batch's completion notice was published.
	Notified bool `json:"notified,omitempty"`
}

// Submitted reports whether the record holds the run's batch.
func (r Record) Submitted() bool { return r.BatchID != "" }

// Store is the durable table: records by key (Key), each with a revision
// that changes on every write, so that two replicas never both win.
type Store interface {
	// Get returns the record and its revision; ErrNotFound when none.
	Get(ctx context.Context, key string) (Record, uint64, error)
	// Create writes a record where none is; ErrExists when one is.
	Create(ctx context.Context, key string, r Record) (uint64, error)
	// Update replaces the record at revision rev; ErrConflict when it
	// was written since.
	Update(ctx context.Context, key string, r Record, rev uint64) (uint64, error)
	// Delete removes the record at revision rev; ErrConflict when it was
	// written since. A record already gone is not an error.
	Delete(ctx context.Context, key string, rev uint64) error
}

var (
	// ErrNotFound is returned by Get when the run has no record.
	ErrNotFound = errors.New("no record for the run")
	// ErrExists is returned by Create when the run already has a record.
	ErrExists = errors.New("the run already has a record")
	// ErrConflict is returned by Update and Delete when the record was
	// written since the revision given.
	ErrConflict = errors.New("the record was written since it was read")
)

// keyPart is what a JetStream key token may hold.
var keyPart = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Key is the record's key for a run (namespace and uid): readable when
// both are key-safe, as a namespace name and an apiserver uid are, and a
// hash of both otherwise.
func Key(namespace, uid string) string {
	if keyPart.MatchString(namespace) && keyPart.MatchString(uid) {
		return "run." + namespace + "." + uid
	}
	sum := sha256.Sum256([]byte(namespace + "/" + uid))
	return "run.h." + hex.EncodeToString(sum[:16])
}

// Stale reports whether a submit claimed at since has outlived bound: the
// process that claimed it can no longer be waiting for the vendor.
func Stale(since, now time.Time, bound time.Duration) bool {
	return !since.IsZero() && now.Sub(since) > bound
}
