package events

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errAckTimeout fails the events of a window still unanswered when its
// deadline passes.
var errAckTimeout = errors.New("events: no publish ack before the attempt timeout")

// ackWindow collects the JetStream acks of the Publisher's windows. It is
// not nats.go's asynchronous publishing written again, but a narrower
// thing the windowed hot path can afford: that path sends a bounded
// window and then waits for all of it, so one reply subscription and one
// deadline per window do what per-message futures, reply subjects and
// timers do in jetstream.PublishMsgAsync. Each event is published with
// core NATS with the reply subject <inbox>.<n>, where n numbers the
// Publisher's messages: slot i of the window that starts at base has n =
// base+i, so an ack finds its slot, and a late ack of an earlier window
// (n < base) finds none and is ignored. The replies are JetStream's
// publish acks, the documented JSON body or the "no responders" status
// when no stream takes the subject, read by parsePubAck.
//
// The inbox comes from the connection, so a custom inbox prefix (a run's
// credential may subscribe only under its own) is kept.
type ackWindow struct {
	sub    *nats.Subscription
	prefix string // the inbox and a dot
	reply  []byte // prefix, then the number: built by the loop only
	timer  *time.Timer
	done   chan struct{} // a token when every sent event was answered

	mu       sync.Mutex
	next     uint64    // the number of the next window's first slot
	base     uint64    // the number of the current window's first slot
	slots    []ackSlot // the current window; nil between windows
	buf      []ackSlot // what slots uses, kept from window to window
	sent     int       // events of the window sent; -1 while sending
	answered int       // slots of the window with an answer
}

// ackSlot is one event's answer.
type ackSlot struct {
	answered bool
	ack      pubAck // when answered without err
	err      error
}

// newAckWindow subscribes to a fresh inbox of nc.
func newAckWindow(nc *nats.Conn) (*ackWindow, error) {
	w := &ackWindow{
		prefix: nc.NewInbox() + ".",
		done:   make(chan struct{}, 1),
		// The first window starts at 1: n is never 0, which is what a
		// reply subject without a number would parse to.
		next: 1,
	}
	w.reply = append(w.reply, w.prefix...)
	sub, err := nc.Subscribe(w.prefix+"*", w.handle)
	if err != nil {
		return nil, err
	}
	// Answers come back as fast as the window goes out; a window of acks
	// must never be dropped as a slow consumer.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	w.sub = sub
	return w, nil
}

// begin opens a window of n slots and returns the number of its first.
func (w *ackWindow) begin(n int) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.base = w.next
	w.next += uint64(n)
	if cap(w.buf) < n {
		w.buf = make([]ackSlot, n)
	}
	w.slots = w.buf[:n]
	clear(w.slots)
	w.sent, w.answered = -1, 0
	select {
	case <-w.done: // a token left by a window that timed out
	default:
	}
	return w.base
}

// replyTo is the reply subject of slot i of the window starting at base.
// It allocates the one string per event that PublishMsg needs.
func (w *ackWindow) replyTo(base uint64, i int) string {
	w.reply = strconv.AppendUint(w.reply[:len(w.prefix)], base+uint64(i), 10)
	return string(w.reply)
}

// wait records that sent events were published (those not sent never get
// an answer), then waits until all of them are answered, timeout passes or
// stop is closed. It returns the window's slots, which stay the loop's
// until the next begin: later answers are ignored.
func (w *ackWindow) wait(sent int, timeout time.Duration, stop <-chan struct{}) []ackSlot {
	w.mu.Lock()
	w.sent = sent
	all := w.answered >= sent
	w.mu.Unlock()
	if !all {
		if w.timer == nil {
			w.timer = time.NewTimer(timeout)
		} else {
			w.timer.Reset(timeout)
		}
		select {
		case <-w.done:
		case <-w.timer.C:
		case <-stop:
		}
		w.timer.Stop()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	slots := w.slots
	w.slots = nil // closed: a late answer finds no slot
	return slots
}

// handle is the subscription's callback: it files an answer under its
// slot of the current window.
func (w *ackWindow) handle(m *nats.Msg) {
	if len(m.Subject) <= len(w.prefix) {
		return
	}
	n, err := strconv.ParseUint(m.Subject[len(w.prefix):], 10, 64)
	if err != nil {
		return
	}
	var slot ackSlot
	slot.answered = true
	// A "no responders" status: no stream takes the subject.
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		slot.err = jetstream.ErrNoStreamResponse
	} else if slot.ack, slot.err = parsePubAck(m.Data); slot.err == nil {
		switch {
		case slot.ack.Error != nil:
			e := slot.ack.Error
			slot.err = &jetstream.APIError{Code: e.Code, ErrorCode: jetstream.ErrorCode(e.ErrCode), Description: e.Description}
		case slot.ack.Stream == "":
			slot.err = errInvalidAck
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n < w.base || n-w.base >= uint64(len(w.slots)) {
		return // an earlier window's, or none of ours
	}
	s := &w.slots[n-w.base]
	if s.answered {
		return
	}
	*s = slot
	w.answered++
	if w.answered == w.sent {
		select {
		case w.done <- struct{}{}:
		default:
		}
	}
}

// close ends the subscription.
func (w *ackWindow) close() {
	_ = w.sub.Unsubscribe()
}
