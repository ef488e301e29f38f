package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultBucket is the key-value bucket batch-poller keeps its table in.
const DefaultBucket = "AGENTPLANE_BATCHES"

// KVConfig shapes the bucket KV creates when it is missing.
type KVConfig struct {
	// Bucket is the bucket's name; DefaultBucket when empty.
	Bucket string
	// Replicas is the bucket's JetStream replicas (1 on a single server).
	Replicas int
	// TTL drops a record this long after its last write; it outlives any
	// vendor's batch window, so only runs long over are forgotten.
	TTL time.Duration
}

// KV is a Store in a JetStream key-value bucket, shared by every replica
// and kept on the server's file storage. The bucket is looked up (and
// created when missing) on first use and again after a failure, so a
// process started while NATS is away begins to work when it is back.
type KV struct {
	js  jetstream.JetStream
	cfg KVConfig

	mu sync.Mutex
	kv jetstream.KeyValue
}

// NewKV returns a KV over js; nothing is sent until the first call.
func NewKV(js jetstream.JetStream, cfg KVConfig) *KV {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.Replicas < 1 {
		cfg.Replicas = 1
	}
	return &KV{js: js, cfg: cfg}
}

// bucket returns the bucket, finding or creating it when not yet known.
func (s *KV) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv != nil {
		return s.kv, nil
	}
	kv, err := s.js.KeyValue(ctx, s.cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: s.cfg.Bucket, Description: "batch-poller: each run's batch (docs/batch-poller.md)",
			History: 1, TTL: s.cfg.TTL, Storage: jetstream.FileStorage, Replicas: s.cfg.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			// Another replica created it first.
			kv, err = s.js.KeyValue(ctx, s.cfg.Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("state bucket %s: %w", s.cfg.Bucket, err)
	}
	s.kv = kv
	return kv, nil
}

// Get implements Store.
func (s *KV) Get(ctx context.Context, key string) (Record, uint64, error) {
	kv, err := s.bucket(ctx)
	if err != nil {
		return Record{}, 0, err
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, 0, ErrNotFound
	}
	if err != nil {
		return Record{}, 0, fmt.Errorf("read %s: %w", key, err)
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Record{}, 0, fmt.Errorf("record %s is not JSON: %w", key, err)
	}
	return r, e.Revision(), nil
}

// Create implements Store.
func (s *KV) Create(ctx context.Context, key string, r Record) (uint64, error) {
	rev, err := s.write(ctx, r, func(kv jetstream.KeyValue, b []byte) (uint64, error) { return kv.Create(ctx, key, b) })
	if errors.Is(err, jetstream.ErrKeyExists) || wrongRevision(err) {
		return 0, ErrExists
	}
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", key, err)
	}
	return rev, nil
}

// Update implements Store.
func (s *KV) Update(ctx context.Context, key string, r Record, rev uint64) (uint64, error) {
	next, err := s.write(ctx, r, func(kv jetstream.KeyValue, b []byte) (uint64, error) { return kv.Update(ctx, key, b, rev) })
	if wrongRevision(err) {
		return 0, ErrConflict
	}
	if err != nil {
		return 0, fmt.Errorf("update %s: %w", key, err)
	}
	return next, nil
}

// write encodes r and hands it to op on the bucket.
func (s *KV) write(ctx context.Context, r Record, op func(jetstream.KeyValue, []byte) (uint64, error)) (uint64, error) {
	kv, err := s.bucket(ctx)
	if err != nil {
		return 0, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	return op(kv, b)
}

// Delete implements Store.
func (s *KV) Delete(ctx context.Context, key string, rev uint64) error {
	kv, err := s.bucket(ctx)
	if err != nil {
		return err
	}
	err = kv.Delete(ctx, key, jetstream.LastRevision(rev))
	if wrongRevision(err) {
		// Gone already (a delete marker is a write) or rewritten: tell
		// which.
		if _, _, gerr := s.Get(ctx, key); errors.Is(gerr, ErrNotFound) {
			return nil
		}
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// wrongRevision reports JetStream's compare-and-set refusal: the key's
// last revision is not the one expected.
func wrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}
