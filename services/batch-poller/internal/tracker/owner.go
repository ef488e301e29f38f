package tracker

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

// Whose batch is it? Every call names a run (namespace and Agent uid) and
// a batch, and is answered only for a batch of that run:
//
//   - in the table, a run has one batch and a batch one run (track); a Get,
//     Cancel or Delete naming another run's batch is ErrNotThisRun, and
//     Submit returns a tracked batch only to the run it was submitted for;
//   - a batch not in the table (after a restart, or on the other replica)
//     that the durable table records for the named run is the run's
//     (durable.go); any other is read at the vendor with the API key of
//     the named run's namespace, so a batch of another
//     vendor account is a 404; and its request id, derived from the run's
//     uid (vendor.CustomID), must be the named run's wherever the vendor
//     shows it: in the results once the batch ended (all three vendors),
//     and before that in the batch's own fields (Gemini's display name,
//     OpenAI's metadata). A batch shown to be another run's is forgotten
//     and answered ErrNotThisRun;
//   - Cancel and Delete of a batch the vendor has not shown to be the
//     run's read it first (verify), so nothing is cancelled or deleted for
//     a run it is not.
//
// What is left: an Anthropic batch that has not ended shows no request id,
// so for a batch the durable table does not hold (submitted by a process
// without NATS, before it restarted) a run could see another run's batch
// as PENDING, or cancel or delete it, if both namespaces use the same
// vendor account and the caller names the other run's batch id. Only agent-controller may
// call (docs/batch-poller.md), and it names the batch id its own Agent
// status holds, which tenants cannot write.

// ErrNotThisRun is wrapped when the named batch is not the named run's:
// tracked for another run, or shown by the vendor to be another run's.
// The server answers NotFound, as for a batch that does not exist.
var ErrNotThisRun = errors.New("no such batch for this run")

func notThisRun(ref Ref) error {
	return fmt.Errorf("%w: batch %s of %s for run %s/%s (uid %s)", ErrNotThisRun, ref.BatchID,
		vendor.ProviderName(ref.Provider), ref.Run.Namespace, ref.Run.Agent, ref.Run.UID)
}

// isGone reports an error after which the entry is no longer tracked.
func isGone(err error) bool { return errors.Is(err, ErrGone) || errors.Is(err, ErrNotThisRun) }

// forget stops tracking e when err says the batch is gone at the vendor
// or is another run's, and returns the error to answer; nil when err is
// neither.
func (t *Tracker) forget(e *entry, err error) error {
	switch {
	case vendor.IsNotFound(err):
		t.untrack(e)
		return fmt.Errorf("%w: %w", ErrGone, err)
	case errors.Is(err, vendor.ErrOtherRun):
		t.untrack(e)
		t.log.Warn("a call named a batch that belongs to another run; forgotten", "provider", vendor.ProviderName(e.ref.Provider),
			"batch", e.ref.BatchID, "namespace", e.ref.Run.Namespace, "agent", e.ref.Run.Agent)
		return notThisRun(e.ref)
	}
	return nil
}

// verify reads a batch the vendor has not yet shown to be e's run's
// before Cancel or Delete act on it, and returns the reason to stop: the
// batch is gone, is another run's, or ctx ended.
func (t *Tracker) verify(ctx context.Context, e *entry) error {
	e.mu.Lock()
	owned := e.owned
	e.mu.Unlock()
	if owned {
		return nil
	}
	if err := t.maybePoll(ctx, e); err != nil && (isGone(err) || ctx.Err() != nil) {
		return err
	}
	return nil
}
