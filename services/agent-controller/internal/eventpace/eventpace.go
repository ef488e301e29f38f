// Package eventpace writes the controller's Kubernetes Events from a
// bounded queue of its own, so that a burst of runs spends the API
// server's writes on Jobs and statuses, not on the Events that tell of
// them, and so that the Events cost the controller a fixed amount of
// memory however many runs start at once.
//
// The Events travel through a client of their own whose client-side
// limiter holds them to a rate (--event-qps), as the kubelet's does for
// its Events. A Recorder queues up to MaxBacklog Events for that client;
// the Events beyond are dropped and counted. An Event is a line in
// `kubectl describe`; the Agent's status holds the same facts. While the
// controller has work waiting (YieldTo), a Normal Event waits too, for at
// most YieldFor: the API server's writes go to starting and following
// runs first, and the Events of a burst follow it.
//
// client-go's events.k8s.io recorder would do the writing too, but it
// holds a goroutine (and its stack) for every Event waiting on the
// client's limiter and keeps every Event it wrote for 6 to 12 minutes to
// fold repeats into a series: at 10,000 runs, about 8 MB of heap and
// 1,000 goroutines (docs/benchmarks.md). A run's transitions are Normal
// Events that never repeat; what repeats is a Warning of a step tried
// again (a batch cleanup), so a Recorder folds repeats into a series as
// client-go does, for Warnings only, and remembers nothing of the rest.
package eventpace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	eventsclient "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	recordutil "k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
)

// MaxBacklog is how many Events may wait for the client at once: at the
// default 50 Events a second, 20 s of them.
const MaxBacklog = 1000

// Workers is how many Events are written at once. The client's limiter
// sets the rate; more than one writer keeps a slow answer from holding
// the rest back.
const Workers = 4

// maxNoteBytes is the longest note the API server accepts (1 kB).
const maxNoteBytes = 1024

// Retries of an Event the API server could not be reached for: the
// Events of a short outage still arrive, those of a long one are dropped
// rather than held without bound.
const (
	maxTries   = 12
	retryAfter = 10 * time.Second
)

// FlushFor bounds how long Run goes on writing the Events still queued
// once its context ends: the last transitions of a controller that stops
// are told, and a stop is not held up by an API server that does not
// answer. At the default --event-qps of 50, about 250 Events.
const FlushFor = 5 * time.Second

// YieldFor is the longest a Normal Event waits for the controller's work
// to be done (YieldTo) before it is written anyway: a controller that is
// never idle still has its Events written, late.
const YieldFor = 10 * time.Second

// yieldPoll is how often a waiting writer looks again.
const yieldPoll = 20 * time.Millisecond

// seriesEnd is how long after its last repeat a Warning starts a new
// Event rather than adding to its series (client-go's figure).
const seriesEnd = 6 * time.Minute

// Recorder is a kevents.EventRecorder that writes each Event once,
// through sink, from a queue of at most MaxBacklog Events.
type Recorder struct {
	sink       eventsclient.EventsGetter
	scheme     *runtime.Scheme
	controller string
	instance   string
	queue      chan *eventsv1.Event
	log        *slog.Logger
	dropped    func(eventType string)
	now        func() time.Time
	retryAfter time.Duration
	flushFor   time.Duration
	yieldFor   time.Duration
	// busy, when set, reports whether the controller has work waiting.
	busy atomic.Pointer[func() bool]

	// mu guards the Warnings' series and when they were last swept of
	// ended ones.
	mu     sync.Mutex
	series map[seriesKey]*seriesEntry
	swept  time.Time
}

// New returns a Recorder writing through sink, whose client should be
// held to the Events' rate, as controller (the Events'
// reportingController; the instance is controller-<hostname>). Regarding
// objects are referred to through scheme. dropped, if not nil, is told
// the type of each Event dropped, from any goroutine. Nothing is written until Run.
func New(sink eventsclient.EventsGetter, scheme *runtime.Scheme, controller string, log *slog.Logger, dropped func(eventType string)) *Recorder {
	host, _ := os.Hostname()
	return &Recorder{
		sink: sink, scheme: scheme, controller: controller, instance: controller + "-" + host,
		queue: make(chan *eventsv1.Event, MaxBacklog), series: map[seriesKey]*seriesEntry{}, log: log, dropped: dropped,
		now: time.Now, retryAfter: retryAfter, flushFor: FlushFor, yieldFor: YieldFor,
	}
}

// YieldTo makes each Normal Event wait while busy reports that the
// controller has work waiting, for at most YieldFor after the Event was
// made; nil writes them at once. It may be called at any time, as a
// controller comes and goes with its leadership.
func (r *Recorder) YieldTo(busy func() bool) {
	if busy == nil {
		r.busy.Store(nil)
		return
	}
	r.busy.Store(&busy)
}

// yield waits while the controller is busy, until ev has waited yieldFor
// since it was made. It returns false when ctx ended meanwhile.
func (r *Recorder) yield(ctx context.Context, ev *eventsv1.Event) bool {
	if ev.Type != corev1.EventTypeNormal {
		// A Warning tells of something wrong: it waits only for a writer,
		// which may be holding a Normal Event back.
		return true
	}
	until := ev.EventTime.Add(r.yieldFor)
	for {
		busy := r.busy.Load()
		if busy == nil || !(*busy)() || !r.now().Before(until) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(yieldPoll):
		}
	}
}

// Eventf queues an Event about regarding (and related, if not nil), or
// drops and counts it when MaxBacklog Events already wait. It never
// blocks.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if !recordutil.ValidateEventType(eventtype) {
		r.log.Error("Event of an unknown type not recorded", "type", eventtype, "reason", reason)
		return
	}
	ev, err := r.event(regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...))
	if err != nil {
		r.log.Error("Event not recorded", "reason", reason, "err", err)
		return
	}
	if eventtype == corev1.EventTypeWarning {
		r.repeat(ev)
	}
	select {
	case r.queue <- ev:
	default:
		if r.dropped != nil {
			r.dropped(eventtype)
		}
	}
}

// event builds the events.k8s.io Event, named and filled as client-go's
// recorder names and fills it.
func (r *Recorder) event(regarding, related runtime.Object, eventtype, reason, action, note string) (*eventsv1.Event, error) {
	ref, err := reference.GetReference(r.scheme, regarding)
	if err != nil {
		return nil, err
	}
	var relatedRef *corev1.ObjectReference
	if related != nil {
		// A related object that cannot be referred to leaves the Event
		// without one rather than unrecorded.
		relatedRef, _ = reference.GetReference(r.scheme, related)
	}
	if len(note) > maxNoteBytes {
		// Cut on a character's boundary: the API refuses invalid UTF-8.
		note = strings.ToValidUTF8(note[:maxNoteBytes-3], "") + "..."
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := r.now()
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: recordutil.GenerateEventName(ref.Name, now.UnixNano()), Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             relatedRef,
		Note:                note,
		Type:                eventtype,
	}, nil
}

// Run writes the queued Events with Workers writers until ctx ends, then
// for at most FlushFor the Events still queued, each tried once.
func (r *Recorder) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case ev := <-r.queue:
					if !r.yield(ctx, ev) || !r.write(ctx, ev) {
						// Cut short by the stop: the flush tries it.
						r.requeue(ev)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	r.flush(ctx)
}

// flush writes what is still queued when Run's ctx has ended, within
// flushFor: one try each, since a retry waits longer than the flush may.
func (r *Recorder) flush(ended context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ended), r.flushFor)
	defer cancel()
	var wg sync.WaitGroup
	for range Workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				select {
				case ev := <-r.queue:
					if err := r.writeOnce(ctx, ev); err != nil && !apierrors.IsAlreadyExists(err) {
						r.log.Warn("Event not written while stopping", "reason", ev.Reason, "regarding", ev.Regarding.Name, "err", err)
						if r.dropped != nil {
							r.dropped(ev.Type)
						}
					}
				default:
					return
				}
			}
		})
	}
	wg.Wait()
	left := 0
	for {
		select {
		case ev := <-r.queue:
			left++
			if r.dropped != nil {
				r.dropped(ev.Type)
			}
		default:
			if left > 0 {
				r.log.Warn("Events dropped: the controller stopped before they were written", "events", left)
			}
			return
		}
	}
}

// write creates ev, or adds to its series, trying again while the API
// server cannot be reached; one the API server refuses is not tried
// again, as it would be refused again. It returns false when ctx ended
// before ev was written or given up.
func (r *Recorder) write(ctx context.Context, ev *eventsv1.Event) bool {
	for try := 1; ; try++ {
		if ctx.Err() != nil {
			return false
		}
		err := r.writeOnce(ctx, ev)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if refused(err) || try >= maxTries {
			r.log.Warn("Event not written", "reason", ev.Reason, "regarding", ev.Regarding.Name, "tries", try, "err", err)
			return true
		}
		// Jittered, so that writers do not retry in step.
		wait := r.retryAfter + time.Duration(rand.Int64N(int64(r.retryAfter)/4+1))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// requeue puts back an Event a stop cut short, or drops and counts it when
// the queue has filled again meanwhile.
func (r *Recorder) requeue(ev *eventsv1.Event) {
	select {
	case r.queue <- ev:
	default:
		if r.dropped != nil {
			r.dropped(ev.Type)
		}
	}
}

// refused reports whether err says the Event itself is wrong, so that
// writing it again would fail again: a request the client cannot build,
// or an answer of the API server other than one that asks to come back
// (too many requests, a timeout, an internal error, unavailable).
func refused(err error) bool {
	var construction *rest.RequestConstructionError
	if errors.As(err, &construction) {
		return true
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		// The API server could not be reached.
		return false
	}
	switch {
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err):
		return false
	}
	return true
}

// writeOnce creates ev or, for a repeat, patches its series into the
// Event that started it; a series whose first Event is gone (expired on
// the server) starts again as an Event of its own.
func (r *Recorder) writeOnce(ctx context.Context, ev *eventsv1.Event) error {
	events := r.sink.Events(ev.Namespace)
	if ev.Series != nil {
		patch, err := json.Marshal(map[string]any{"series": ev.Series})
		if err != nil {
			return err
		}
		_, err = events.Patch(ctx, ev.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	_, err := events.Create(ctx, ev, metav1.CreateOptions{})
	return err
}

// seriesKey is what makes two Warnings repeats of one another: all but
// their note and time (client-go's rule).
type seriesKey struct {
	typ, action, reason string
	regarding, related  corev1.ObjectReference
}

// seriesEntry is the Event a series of repeats is written into.
type seriesEntry struct {
	name  string
	count int32
	last  time.Time
}

// repeat makes ev a repeat of the same Warning recorded within seriesEnd:
// ev then takes the first one's name and the series' count, and its write
// patches that Event. A Warning with no recent twin is remembered as the
// start of a series.
func (r *Recorder) repeat(ev *eventsv1.Event) {
	key := seriesKey{typ: ev.Type, action: ev.Action, reason: ev.Reason, regarding: ev.Regarding}
	if ev.Related != nil {
		key.related = *ev.Related
	}
	now := ev.EventTime.Time
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.swept) > time.Minute {
		r.swept = now
		for k, e := range r.series {
			if now.Sub(e.last) > seriesEnd {
				delete(r.series, k)
			}
		}
	}
	e, ok := r.series[key]
	if !ok || now.Sub(e.last) > seriesEnd {
		r.series[key] = &seriesEntry{name: ev.Name, count: 1, last: now}
		return
	}
	e.count++
	e.last = now
	ev.Name = e.name
	ev.Series = &eventsv1.EventSeries{Count: e.count, LastObservedTime: metav1.NewMicroTime(now)}
}
