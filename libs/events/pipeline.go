package events

import (
	"context"
	"errors"
	"fmt"

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
	w, err := p.ackWindow()
	if err != nil {
		p.noteFailure(err)
		for _, ev := range batch {
			p.publishOne(ctx, ev)
		}
		return
	}
	base := w.begin(len(batch))
	sent := 0
	for i, ev := range batch {
		msg, err := p.out.message(ev, false)
		if err != nil {
			p.drop(ev, err)
			batch[i] = nil
			sent = i + 1
			continue
		}
		msg.Reply = w.replyTo(base, i)
		if err := p.nc.PublishMsg(msg); err != nil {
			break // this one and the rest go through publishOne below
		}
		sent = i + 1
	}
	slots := w.wait(sent, p.opts.AttemptTimeout, ctx.Done())
	failed := false
	for i, ev := range batch[:sent] {
		if ev == nil {
			continue
		}
		s := &slots[i]
		switch {
		case s.answered && s.err == nil:
			p.published.Add(1)
			if s.ack.Duplicate {
				p.duplicates.Add(1)
			}
			if failed {
				p.noteReorder()
			}
			batch[i] = nil
		case ctx.Err() != nil:
			// Close gave up; publishOne below counts the rest as dropped.
		default:
			failed = true
			err := s.err
			if !s.answered {
				err = errAckTimeout
			}
			p.noteFailure(err)
			if errors.Is(err, jetstream.ErrNoStreamResponse) {
				p.streamReady = false
			}
		}
	}
	for _, ev := range batch {
		if ev != nil {
			p.publishOne(ctx, ev)
		}
	}
}

// ackWindow returns the Publisher's ack subscription, made on first use so
// that a Publisher of MaxInFlight 1 has none.
func (p *Publisher) ackWindow() (*ackWindow, error) {
	if p.acks == nil {
		w, err := newAckWindow(p.nc)
		if err != nil {
			return nil, fmt.Errorf("subscribe to publish acks: %w", err)
		}
		p.acks = w
	}
	return p.acks, nil
}

// noteReorder counts an event stored ahead of an earlier one that failed.
func (p *Publisher) noteReorder() {
	if p.reordered.Add(1) == 1 {
		p.log.Warn("an event was stored ahead of an earlier failed one; consumers order by sequence")
	}
}
