package eventpace

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktesting "k8s.io/client-go/testing"
)

// TestEventsYieldToTheControllersWork: while the controller has work
// waiting, a Normal Event waits, until the work is done or YieldFor has
// passed since the Event was made; a Warning does not wait for the
// controller; an Event held back when the Recorder stops is still written
// by the flush.
func TestEventsYieldToTheControllersWork(t *testing.T) {
	cases := []struct {
		rule      string
		eventType string
		// then changes the world once the Event has been seen held back
		// (nil: the Event is not held back at all).
		then func(busy *atomic.Bool, clock *atomic.Int64, stop context.CancelFunc)
	}{
		{"a Normal Event waits while work waits, and goes once there is none", corev1.EventTypeNormal,
			func(busy *atomic.Bool, _ *atomic.Int64, _ context.CancelFunc) { busy.Store(false) }},
		{"a Normal Event waits no longer than YieldFor, however busy the controller stays", corev1.EventTypeNormal,
			func(_ *atomic.Bool, clock *atomic.Int64, _ context.CancelFunc) { clock.Store(int64(YieldFor)) }},
		{"a Normal Event held back when the controller stops is written by the flush", corev1.EventTypeNormal,
			func(_ *atomic.Bool, _ *atomic.Int64, stop context.CancelFunc) { stop() }},
		{"a Warning does not wait for the controller", corev1.EventTypeWarning, nil},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			r, cs := newRecorder(map[string]int{})
			// The clock moves only when the case moves it.
			base := time.Now()
			var clock atomic.Int64
			r.now = func() time.Time { return base.Add(time.Duration(clock.Load())) }
			var busy atomic.Bool
			busy.Store(true)
			r.YieldTo(busy.Load)
			written := make(chan struct{}, 1)
			cs.PrependReactor("create", "events", func(ktesting.Action) (bool, runtime.Object, error) {
				written <- struct{}{}
				return true, &eventsv1.Event{}, nil
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			go func() { defer close(done); r.Run(ctx) }()
			defer func() { cancel(); <-done }()
			r.Eventf(pod("p"), nil, tc.eventType, "Started", "Start", "")
			if tc.then != nil {
				select {
				case <-written:
					t.Fatal("the Event was written while the controller had work waiting")
				case <-time.After(10 * yieldPoll):
				}
				tc.then(&busy, &clock, cancel)
			}
			select {
			case <-written:
			case <-time.After(time.Minute):
				t.Fatal("the Event was never written")
			}
		})
	}
}
