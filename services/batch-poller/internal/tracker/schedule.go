package tracker

import (
	"container/heap"
	"context"
	"hash/fnv"
	"time"
)

// Every batch has a phase inside the poll period, from a hash of its key,
// and is first polled at its phase: polls of batches submitted together
// are spread over the whole period instead of landing in one burst.

// phaseOf is the batch's offset inside the period.
func phaseOf(key string, period time.Duration) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return time.Duration(h.Sum64() % uint64(period))
}

// nextSlot is the first instant at or after notBefore that falls on the
// batch's phase (relative to epoch).
func nextSlot(epoch, notBefore time.Time, phase, period time.Duration) time.Time {
	since := notBefore.Sub(epoch)
	if since < 0 {
		since = 0
	}
	base := since - since%period + phase
	if base < since {
		base += period
	}
	return epoch.Add(base)
}

// pollHeap orders entries by their next scheduled poll.
type pollHeap []*entry

func (h pollHeap) Len() int           { return len(h) }
func (h pollHeap) Less(i, j int) bool { return h[i].nextPoll.Before(h[j].nextPoll) }
func (h pollHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *pollHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *pollHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}

// schedule puts e in the heap for its next poll: every after the last
// one started, or, never polled, at its phase. Only the first poll is
// phase-locked; after it, each poll follows the previous by exactly a
// period (or a backoff after failures), so polls stay spread and a poll
// that started late never pushes the next one a whole period further.
// t.mu must be held.
func (t *Tracker) schedule(e *entry, lastStart time.Time, every time.Duration) {
	now := t.now()
	if lastStart.IsZero() {
		e.nextPoll = nextSlot(t.epoch, now, e.phase, t.period)
	} else {
		e.nextPoll = lastStart.Add(every)
	}
	if e.index >= 0 {
		heap.Fix(&t.queue, e.index)
		return
	}
	heap.Push(&t.queue, e)
	t.wakeLocked()
}

// backoff is the wait between polls of a batch after failures failed
// polls in a row: the period, doubled by each failure up to maxBackoff,
// so a vendor that is away is not read at the full rate, and one that is
// back is read again within maxBackoff.
func (t *Tracker) backoff(failures int) time.Duration {
	d := t.period
	for range failures {
		if d >= t.maxBackoff/2 {
			return t.maxBackoff
		}
		d *= 2
	}
	return d
}

// unschedule takes e out of the heap; t.mu must be held.
func (t *Tracker) unschedule(e *entry) {
	if e.index >= 0 {
		heap.Remove(&t.queue, e.index)
	}
}

func (t *Tracker) wakeLocked() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Run polls due batches until ctx ends, at most Concurrency at a time.
// When every worker is busy the next poll waits: polls run late under
// overload, never early.
func (t *Tracker) Run(ctx context.Context) {
	sem := make(chan struct{}, t.concurrency)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		t.mu.Lock()
		var due *entry
		wait := time.Hour
		if len(t.queue) > 0 {
			top := t.queue[0]
			if d := top.nextPoll.Sub(t.now()); d > 0 {
				wait = d
			} else {
				due = heap.Pop(&t.queue).(*entry)
			}
		}
		t.mu.Unlock()
		if due == nil {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-t.wake:
			case <-timer.C:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case sem <- struct{}{}:
		}
		go func(e *entry) {
			defer func() { <-sem }()
			_ = t.maybePoll(ctx, e)
			t.mu.Lock()
			defer t.mu.Unlock()
			e.mu.Lock()
			live := !e.ended && !e.gone
			last, failures := e.lastStart, e.failures
			e.mu.Unlock()
			if live && t.entries[e.key] == e {
				t.schedule(e, last, t.backoff(failures))
			}
		}(due)
	}
}
