package tracker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"

	"github.com/agentplane/agentplane/services/batch-poller/internal/state"
	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

// The durable table (package state) is what makes Submit exactly-once
// across restarts and replicas, and the completion notice once per batch:
//
//   - before a vendor submit, the run is claimed in the store (Create
//     wins for one caller); the claim becomes the run's batch id once the
//     vendor answers. A Submit that finds the batch id returns it; one
//     that finds a live claim is ErrSubmitInProgress (the caller retries);
//     no vendor submit is sent without a claim.
//   - a claim is released when the vendor surely did not create a batch
//     (it refused, or the request never left: a dial error). When the
//     outcome is unknown (a timeout or reset after the request was sent),
//     the claim is kept and taken over only once it is older than
//     submitBound, when its process can no longer be waiting.
//   - the first replica to mark the record Notified publishes the notice.
//   - a Get naming the batch the record holds trusts it as the run's
//     without asking the vendor (owner.go).

// ErrSubmitInProgress is wrapped when another call (another replica, or a
// process that may still be waiting for the vendor) holds the run's
// submit; the caller retries and gets the batch once it is recorded.
var ErrSubmitInProgress = errors.New("a submit for this run is in progress")

// ErrStateUnavailable is wrapped when the durable table cannot be read or
// written: no batch is submitted without it, so the caller retries.
var ErrStateUnavailable = errors.New("batch state store unavailable")

// recordWrite is how the batch id is written after a vendor submit: it
// must land, so it is retried for a while whatever the caller does.
var recordWrite = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 7, Cap: 5 * time.Second}

// claim is the outcome of claimSubmit: the batch the run already has, or
// the revision of this call's claim.
type claim struct {
	existing *Ref
	rev      uint64
	rec      state.Record
}

// claimSubmit claims the run's submit in the store, or returns the batch
// it already has.
func (t *Tracker) claimSubmit(ctx context.Context, s Submission, p batchv1.Provider) (claim, error) {
	key := state.Key(s.Run.Namespace, s.Run.UID)
	now := t.now()
	rec := state.Record{Namespace: s.Run.Namespace, Agent: s.Run.Agent, UID: s.Run.UID, Provider: vendor.ProviderName(p),
		Model: s.Model, SubmittingBy: t.identity, SubmittingSince: now}
	rev, err := t.store.Create(ctx, key, rec)
	if err == nil {
		return claim{rev: rev, rec: rec}, nil
	}
	if !errors.Is(err, state.ErrExists) {
		return claim{}, fmt.Errorf("%w: %w", ErrStateUnavailable, err)
	}
	old, rev, err := t.store.Get(ctx, key)
	switch {
	case errors.Is(err, state.ErrNotFound):
		// Released between the two calls: the next try claims it.
		return claim{}, fmt.Errorf("%w: the claim was just released", ErrSubmitInProgress)
	case err != nil:
		return claim{}, fmt.Errorf("%w: %w", ErrStateUnavailable, err)
	case old.Submitted():
		ref, err := t.refOf(s.Run, old)
		return claim{existing: &ref}, err
	case !state.Stale(old.SubmittingSince, now, t.submitBound):
		return claim{}, fmt.Errorf("%w: claimed by %s at %s", ErrSubmitInProgress, old.SubmittingBy,
			old.SubmittingSince.UTC().Format(time.RFC3339))
	}
	t.log.Warn("taking over a submit whose process did not finish it; the vendor may hold a batch of that attempt",
		"namespace", s.Run.Namespace, "agent", s.Run.Agent, "uid", s.Run.UID, "claimedBy", old.SubmittingBy,
		"since", old.SubmittingSince)
	t.m.SubmitTakeovers.Inc()
	rev, err = t.store.Update(ctx, key, rec, rev)
	if errors.Is(err, state.ErrConflict) {
		return claim{}, fmt.Errorf("%w: another replica took it over", ErrSubmitInProgress)
	}
	if err != nil {
		return claim{}, fmt.Errorf("%w: %w", ErrStateUnavailable, err)
	}
	return claim{rev: rev, rec: rec}, nil
}

// refOf is the batch a record holds, for run.
func (t *Tracker) refOf(run Run, rec state.Record) (Ref, error) {
	for p := range t.adapters {
		if vendor.ProviderName(p) == rec.Provider {
			return Ref{Run: run, Provider: p, BatchID: rec.BatchID, Model: rec.Model}, nil
		}
	}
	return Ref{}, fmt.Errorf("the run's batch %s is at provider %q, which this batch-poller does not serve", rec.BatchID, rec.Provider)
}

// settleClaim turns the claim into the run's batch id. The vendor has the
// batch now, so the write is retried past the caller's patience; if it
// still fails, the batch stays in this process's table and the caller
// gets it (its status records it), and only a Submit retried on another
// replica could miss it.
func (t *Tracker) settleClaim(ctx context.Context, c claim, ref Ref) {
	key := state.Key(ref.Run.Namespace, ref.Run.UID)
	rec := c.rec
	rec.BatchID, rec.SubmittingBy, rec.SubmittingSince = ref.BatchID, "", time.Time{}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, recordWrite, func(ctx context.Context) (bool, error) {
		_, last = t.store.Update(ctx, key, rec, c.rev)
		if errors.Is(last, state.ErrConflict) {
			return false, last
		}
		return last == nil, nil
	})
	if err != nil {
		t.log.Error("batch submitted but not recorded in the state store", "batch", ref.BatchID,
			"namespace", ref.Run.Namespace, "agent", ref.Run.Agent, "err", errors.Join(err, last))
	}
}

// releaseClaim gives the claim up after a submit the vendor surely did
// not turn into a batch, so the retry may submit.
func (t *Tracker) releaseClaim(ctx context.Context, run Run, c claim) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.callTimeout)
	defer cancel()
	if err := t.store.Delete(ctx, state.Key(run.Namespace, run.UID), c.rev); err != nil {
		// It goes stale after submitBound and is taken over then.
		t.log.Warn("submit claim not released", "namespace", run.Namespace, "agent", run.Agent, "err", err)
	}
}

// notCreated reports a submit error after which the vendor holds no batch:
// it answered with an error, or the request never reached it.
func notCreated(err error) bool {
	var ve *vendor.Error
	if errors.As(err, &ve) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// claimNotice reports whether this call publishes e's completion notice:
// true for the first to mark the run's record Notified, false when
// another replica or an earlier process did. Without a record of this
// batch, or without the store, it is true: a notice is a wake-up, and a
// second one costs the controller a Get.
func (t *Tracker) claimNotice(ctx context.Context, e *entry) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.callTimeout)
	defer cancel()
	key := state.Key(e.ref.Run.Namespace, e.ref.Run.UID)
	for range 3 {
		rec, rev, err := t.store.Get(ctx, key)
		if err != nil || rec.BatchID != e.ref.BatchID {
			if err != nil && !errors.Is(err, state.ErrNotFound) {
				t.log.Warn("cannot read whether the notice went out; publishing it", "batch", e.ref.BatchID, "err", err)
			}
			return true
		}
		if rec.Notified {
			return false
		}
		rec.Notified = true
		if _, err = t.store.Update(ctx, key, rec, rev); err == nil {
			return true
		} else if !errors.Is(err, state.ErrConflict) {
			t.log.Warn("cannot mark the notice published; publishing it", "batch", e.ref.BatchID, "err", err)
			return true
		}
	}
	return true
}

// recordOwns reports whether the durable table says the batch e names is
// its run's: submitted here, for this run. It is asked once per entry.
func (t *Tracker) recordOwns(ctx context.Context, e *entry) bool {
	rec, _, err := t.store.Get(ctx, state.Key(e.ref.Run.Namespace, e.ref.Run.UID))
	return err == nil && rec.BatchID == e.ref.BatchID && rec.Provider == vendor.ProviderName(e.ref.Provider)
}

// forgetRecord removes the run's record once its batch is deleted at the
// vendor; a record of another batch is left alone.
func (t *Tracker) forgetRecord(ctx context.Context, ref Ref) {
	key := state.Key(ref.Run.Namespace, ref.Run.UID)
	rec, rev, err := t.store.Get(ctx, key)
	if err != nil || rec.BatchID != ref.BatchID {
		return
	}
	if err := t.store.Delete(ctx, key, rev); err != nil {
		t.log.Warn("record of a deleted batch not removed; it expires with the bucket's TTL", "batch", ref.BatchID, "err", err)
	}
}
