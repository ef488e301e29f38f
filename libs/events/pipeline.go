package events

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// publishWindow publishes up to MaxInFlight events without waiting for
// each ack, then waits for all of them. Events whose publish failed are
// then published again one at a time, in order, with publishOne's retries;
// dedupe ids make a resend of an event that was in fact stored harmless.
//
// Ordering: the server stores one connection's messages in the order they
// were sent, so the stream matches the run unless an event fails while a
// later one of the same window succeeds (a server dying mid-window, or
// JetStream answering "no responders" during a restart). Then the failed
// event lands after it: counted as reordered and logged once; consumers
// restore run order from the envelope's sequence.
func (p *Publisher) publishWindow(ctx context.Context, batch []*eventsv1.RunEvent) {
	futs := make([]jetstream.PubAckFuture, len(batch))
	sent := 0
	for i, ev := range batch {
		msg, err := p.out.message(ev, false)
		if err != nil {
			p.drop(ev, err)
			batch[i] = nil
			sent = i + 1
			continue
		}
		// No library-level retry: it would resend this event after later
		// ones of the window and reorder them.
		f, err := p.js.PublishMsgAsync(msg, jetstream.WithRetryAttempts(0))
		if err != nil {
			break // this one and the rest go through publishOne below
		}
		futs[i], sent = f, i+1
	}
	acked := make([]bool, len(batch))
	failed := false
	for i, f := range futs[:sent] {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			acked[i] = true
			p.published.Add(1)
			if ack.Duplicate {
				p.duplicates.Add(1)
			}
			if failed {
				p.noteReorder()
			}
		case err := <-f.Err():
			failed = true
			p.noteFailure(err)
			if errors.Is(err, jetstream.ErrNoStreamResponse) {
				p.streamReady = false
			}
		case <-ctx.Done():
			// Close gave up; publishOne below counts the rest as dropped.
		}
	}
	for i, ev := range batch {
		if ev != nil && !acked[i] {
			p.publishOne(ctx, ev)
		}
	}
}

// noteReorder counts an event stored ahead of an earlier one that failed.
func (p *Publisher) noteReorder() {
	if p.reordered.Add(1) == 1 {
		p.log.Warn("an event was stored ahead of an earlier failed one; consumers order by sequence")
	}
}
