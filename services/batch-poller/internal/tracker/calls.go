package tracker

import (
	"context"
	"errors"
	"fmt"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"

	"github.com/agentplane/agentplane/libs/vendors"

	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

// The calls BatchService serves: Get, Submit, Cancel and Delete.

// Get returns the batch's state, reading the vendor only when the batch
// was never read or its last read is a period old. A batch not tracked yet
// (after a restart) is tracked from now on, once the vendor does not show
// it is another run's (owner.go).
func (t *Tracker) Get(ctx context.Context, ref Ref) (Snapshot, error) {
	e, err := t.track(ref, false)
	if err != nil {
		return Snapshot{}, err
	}
	t.checkRecord(ctx, e)
	if err := t.maybePoll(ctx, e); err != nil && (isGone(err) || ctx.Err() != nil) {
		return Snapshot{}, err
	}
	return e.snapshot()
}

// checkRecord marks e owned when the durable table holds its batch for
// its run; asked once per entry, and only while the vendor has not
// shown it.
func (t *Tracker) checkRecord(ctx context.Context, e *entry) {
	e.mu.Lock()
	ask := !e.owned && !e.recordChecked
	e.recordChecked = true
	e.mu.Unlock()
	if !ask || !t.recordOwns(ctx, e) {
		return
	}
	e.mu.Lock()
	e.owned = true
	e.mu.Unlock()
}

// Submit sends a run's prompt, or returns the batch the run already has:
// in this process's table, or in the durable one (durable.go), whichever
// replica or process submitted it.
func (t *Tracker) Submit(ctx context.Context, s Submission) (string, batchv1.Provider, error) {
	cli := cliOf(s.Model)
	p, ok := vendor.ProviderFor(cli)
	if !ok {
		return "", 0, fmt.Errorf("%w: model %q runs on %s", ErrNoBatchAPI, s.Model, cli)
	}
	v, err, _ := t.submits.Do(runKey(s.Run), func() (any, error) {
		t.mu.Lock()
		if e, ok := t.entries[runKey(s.Run)]; ok {
			t.mu.Unlock()
			return e.ref, nil
		}
		t.mu.Unlock()
		a, err := t.adapter(p)
		if err != nil {
			return nil, err
		}
		key, err := t.apiKey(ctx, s.Run, p)
		if err != nil {
			return nil, err
		}
		c, err := t.claimSubmit(ctx, s, p)
		if err != nil {
			outcome := "unavailable"
			if errors.Is(err, ErrSubmitInProgress) {
				outcome = "in_progress"
			}
			t.m.SubmitsRecorded.WithLabelValues(outcome).Inc()
			return nil, err
		}
		if c.existing != nil {
			t.m.SubmitsRecorded.WithLabelValues("existing").Inc()
			if _, err := t.track(*c.existing, true); err != nil {
				return nil, err
			}
			return *c.existing, nil
		}
		// The vendor call outlives the caller: a submit cut short could
		// leave a batch nobody records.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.callTimeout)
		defer cancel()
		id, err := a.Submit(sctx, key, vendor.Request{
			CustomID: vendor.CustomID(s.Run.Namespace, s.Run.UID), Model: s.Model, Prompt: s.Prompt,
			MaxTokens: s.MaxTokens, OutputSchema: s.OutputSchema,
		})
		if err != nil {
			if notCreated(err) {
				t.releaseClaim(ctx, s.Run, c)
			}
			return nil, err
		}
		ref := Ref{Run: s.Run, Provider: p, BatchID: id, Model: s.Model}
		t.settleClaim(ctx, c, ref)
		if _, err := t.track(ref, true); err != nil {
			return nil, err
		}
		t.log.Info("batch submitted", "provider", vendor.ProviderName(p), "batch", id,
			"namespace", s.Run.Namespace, "agent", s.Run.Agent, "uid", s.Run.UID)
		return ref, nil
	})
	if err != nil {
		return "", 0, err
	}
	ref := v.(Ref)
	return ref.BatchID, ref.Provider, nil
}

// Cancel asks the vendor to stop the batch. A batch known to have ended is
// answered from the table without a vendor call.
func (t *Tracker) Cancel(ctx context.Context, ref Ref) (Snapshot, error) {
	e, err := t.track(ref, false)
	if err != nil {
		return Snapshot{}, err
	}
	if err := t.verify(ctx, e); err != nil {
		return Snapshot{}, err
	}
	e.mu.Lock()
	ended := e.ended
	e.mu.Unlock()
	if ended {
		return e.snapshot()
	}
	a, err := t.adapter(ref.Provider)
	if err != nil {
		return Snapshot{}, err
	}
	key, err := t.apiKey(ctx, ref.Run, ref.Provider)
	if err != nil {
		return Snapshot{}, err
	}
	out, err := a.Cancel(ctx, key, e.vref)
	if err != nil {
		if gone := t.forget(e, err); gone != nil {
			return Snapshot{}, gone
		}
		return Snapshot{}, err
	}
	t.record(ctx, e, out)
	return e.snapshot()
}

// Delete removes the batch at the vendor and stops tracking it. A batch
// not tracked (after a restart, or deleted before) is tracked first, so
// the vendor is asked whose it is before anything is deleted; one already
// gone at the vendor is not an error. On error the batch stays tracked, so
// a retry finds it.
func (t *Tracker) Delete(ctx context.Context, ref Ref) error {
	a, err := t.adapter(ref.Provider)
	if err != nil {
		return err
	}
	e, err := t.track(ref, false)
	if err != nil {
		return err
	}
	if err := t.verify(ctx, e); err != nil {
		if errors.Is(err, ErrGone) {
			return nil
		}
		return err
	}
	key, err := t.apiKey(ctx, ref.Run, ref.Provider)
	if err != nil {
		return err
	}
	if err := a.Delete(ctx, key, ref.BatchID); err != nil {
		return err
	}
	t.untrack(e)
	t.forgetRecord(ctx, ref)
	return nil
}

// cliOf is the vendor CLI a model routes to.
func cliOf(model string) string { return vendors.Route(model).Name() }
