package run

import (
	"sync"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// eventQueue hands a turn's events from the CLI's reader to the caller's
// stream. It never blocks the reader: a slow or stalled caller must not
// slow the CLI or the log tail, so it grows instead, bounded by what one
// turn prints.
type eventQueue struct {
	mu    sync.Mutex
	items []*eventsv1.RunEvent
	// ready holds a token whenever items may be non-empty.
	ready chan struct{}
}

func newEventQueue() *eventQueue {
	return &eventQueue{ready: make(chan struct{}, 1)}
}

// push adds ev and wakes the consumer.
func (q *eventQueue) push(ev *eventsv1.RunEvent) {
	q.mu.Lock()
	q.items = append(q.items, ev)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take removes and returns everything queued, in order.
func (q *eventQueue) take() []*eventsv1.RunEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}
