package eventpace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ktesting "k8s.io/client-go/testing"
)

// The real API server checks the Events a Recorder writes in the
// controller's suite (internal/controller, TestTransitionsAreRecordedAsEvents
// and the others that record); these tests cover what needs a fault or a
// queue held still.

var quiet = slog.New(slog.DiscardHandler)

func pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("u-" + name)}}
}

// newRecorder is a Recorder over a fake clientset, with the drops counted
// by type (read once the Recorder has stopped: its writers drop at once).
func newRecorder(dropped map[string]int) (*Recorder, *fake.Clientset) {
	cs := fake.NewClientset()
	var mu sync.Mutex
	r := New(cs.EventsV1(), scheme.Scheme, "agent-controller", quiet, func(t string) {
		mu.Lock()
		defer mu.Unlock()
		dropped[t]++
	})
	r.retryAfter = time.Millisecond
	return r, cs
}

func TestRecorderBoundsTheBacklog(t *testing.T) {
	cases := []struct {
		name            string
		normal, warning int
		queued, dropped int
	}{
		{"Events up to MaxBacklog wait for the client", MaxBacklog, 0, MaxBacklog, 0},
		{"Events beyond the backlog are dropped and counted", MaxBacklog + 250, 0, MaxBacklog, 250},
		{"a Warning beyond the backlog is dropped like any Event", MaxBacklog, 1, MaxBacklog, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dropped := map[string]int{}
			// Not running: nothing leaves the queue.
			r, _ := newRecorder(dropped)
			for i := range tc.normal {
				r.Eventf(pod(fmt.Sprint("p", i)), nil, corev1.EventTypeNormal, "Started", "Start", "run %d", i)
			}
			for i := range tc.warning {
				r.Eventf(pod(fmt.Sprint("w", i)), nil, corev1.EventTypeWarning, "Failed", "Finish", "run %d", i)
			}
			if got := len(r.queue); got != tc.queued {
				t.Errorf("%d Events queued, want %d", got, tc.queued)
			}
			if got := dropped[corev1.EventTypeNormal] + dropped[corev1.EventTypeWarning]; got != tc.dropped {
				t.Errorf("dropped %d Events (%v), want %d", got, dropped, tc.dropped)
			}
		})
	}
}

func TestADrainedBacklogAdmitsAsManyAgain(t *testing.T) {
	dropped := map[string]int{}
	r, cs := newRecorder(dropped)
	var written atomic.Int32
	cs.PrependReactor("create", "events", func(ktesting.Action) (bool, runtime.Object, error) {
		written.Add(1)
		return true, &eventsv1.Event{}, nil
	})
	for i := range MaxBacklog + 10 {
		r.Eventf(pod(fmt.Sprint("p", i)), nil, corev1.EventTypeNormal, "Started", "Start", "")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	wait := func(n int32) {
		deadline := time.Now().Add(30 * time.Second)
		for written.Load() < n && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	wait(MaxBacklog)
	for i := range MaxBacklog {
		r.Eventf(pod(fmt.Sprint("q", i)), nil, corev1.EventTypeNormal, "Started", "Start", "")
	}
	wait(2 * MaxBacklog)
	cancel()
	<-done
	if n := written.Load(); n != 2*MaxBacklog || dropped[corev1.EventTypeNormal] != 10 {
		t.Errorf("%d Events written, %d dropped; want %d written, 10 dropped", n, dropped[corev1.EventTypeNormal], 2*MaxBacklog)
	}
}

func TestStoppingWritesWhatIsQueued(t *testing.T) {
	const flushFor = 500 * time.Millisecond
	cases := []struct {
		name             string
		answer           func() error
		written, dropped int
	}{
		{"the Events queued when Run's context ends are still written", func() error { return nil }, 20, 0},
		{"an Event the API server cannot take while stopping is dropped and counted, not tried again",
			func() error { return errors.New("connection refused") }, 0, 20},
		// The fake clientset does not end a request with its context, so
		// the writes under way finish; no Event is begun after the flush.
		{"an API server slower than the flush is given no Event once the flush is over",
			func() error { time.Sleep(2 * flushFor); return nil }, Workers, 20 - Workers},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dropped := map[string]int{}
			r, cs := newRecorder(dropped)
			r.flushFor = flushFor
			var written atomic.Int32
			cs.PrependReactor("create", "events", func(ktesting.Action) (bool, runtime.Object, error) {
				if err := tc.answer(); err != nil {
					return true, nil, err
				}
				written.Add(1)
				return true, &eventsv1.Event{}, nil
			})
			for i := range 20 {
				r.Eventf(pod(fmt.Sprint("p", i)), nil, corev1.EventTypeNormal, "Succeeded", "Finish", "")
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			r.Run(ctx)
			if got, lost := int(written.Load()), dropped[corev1.EventTypeNormal]; got != tc.written || lost != tc.dropped {
				t.Errorf("%d written, %d dropped; want %d written, %d dropped", got, lost, tc.written, tc.dropped)
			}
			if len(r.queue) != 0 {
				t.Errorf("%d Events still queued after Run returned", len(r.queue))
			}
		})
	}
}

func TestAnEventWaitingToBeTriedAgainIsFlushedOnStop(t *testing.T) {
	dropped := map[string]int{}
	r, cs := newRecorder(dropped)
	r.retryAfter = time.Hour
	var calls, written atomic.Int32
	failedOnce := make(chan struct{})
	cs.PrependReactor("create", "events", func(ktesting.Action) (bool, runtime.Object, error) {
		if calls.Add(1) == 1 {
			close(failedOnce)
			return true, nil, errors.New("connection refused")
		}
		written.Add(1)
		return true, &eventsv1.Event{}, nil
	})
	r.Eventf(pod("p"), nil, corev1.EventTypeNormal, "Succeeded", "Finish", "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	<-failedOnce
	// The writer now waits an hour to try again; the stop cuts that short.
	cancel()
	<-done
	if written.Load() != 1 || dropped[corev1.EventTypeNormal] != 0 {
		t.Errorf("%d written, %d dropped; want the Event written by the flush", written.Load(), dropped[corev1.EventTypeNormal])
	}
}

func TestTheEventIsFilledAsClientGoFillsIt(t *testing.T) {
	r, _ := newRecorder(map[string]int{})
	at := time.Unix(1_800_000_000, 42)
	r.now = func() time.Time { return at }
	long := strings.Repeat("a", 2000)
	r.Eventf(pod("run-1"), pod("job-1"), corev1.EventTypeWarning, "Failed", "Finish", "exit %d: %s", 3, long)
	ev := <-r.queue
	checks := []struct {
		rule      string
		got, want any
	}{
		{"named after the regarding object and the time in hex nanoseconds", ev.Name, fmt.Sprintf("run-1.%x", at.UnixNano())},
		{"in the regarding object's namespace", ev.Namespace, "ns"},
		{"reported by the controller", ev.ReportingController, "agent-controller"},
		{"from this instance", strings.HasPrefix(ev.ReportingInstance, "agent-controller-"), true},
		{"regarding the object by kind, name and uid", ev.Regarding.Kind + "/" + ev.Regarding.Name + "/" + string(ev.Regarding.UID), "Pod/run-1/u-run-1"},
		{"related to the second object", ev.Related != nil && ev.Related.Name == "job-1", true},
		{"its type, reason and action as given", ev.Type + "/" + ev.Reason + "/" + ev.Action, "Warning/Failed/Finish"},
		{"the note cut to the API server's 1 kB", len(ev.Note), maxNoteBytes},
		{"the note formatted", strings.HasPrefix(ev.Note, "exit 3: aaa") && strings.HasSuffix(ev.Note, "..."), true},
		{"at the time it was recorded", ev.EventTime.Time.Equal(at), true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.rule, c.got, c.want)
		}
	}
}

func TestAnEventThatCannotBeMadeIsNotQueued(t *testing.T) {
	cases := []struct {
		name   string
		record func(r *Recorder)
	}{
		{"a type other than Normal or Warning", func(r *Recorder) {
			r.Eventf(pod("p"), nil, "Error", "Failed", "Finish", "")
		}},
		{"a regarding object of a kind the scheme does not know", func(r *Recorder) {
			r.Eventf(&unknown{}, nil, corev1.EventTypeNormal, "Started", "Start", "")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dropped := map[string]int{}
			r, _ := newRecorder(dropped)
			tc.record(r)
			if len(r.queue) != 0 || len(dropped) != 0 {
				t.Errorf("%d queued, %v dropped; want neither", len(r.queue), dropped)
			}
		})
	}
}

// unknown is a kind no scheme holds.
type unknown struct{ metav1.ObjectMeta }

func (u *unknown) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (u *unknown) DeepCopyObject() runtime.Object   { c := *u; return &c }

func TestWriteTriesAgainOnlyWhatMayPass(t *testing.T) {
	gr := schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	cases := []struct {
		name  string
		err   error
		tries int
	}{
		{"an API server that cannot be reached is tried again until it answers", errors.New("connection refused"), 3},
		{"too many requests are tried again", apierrors.NewTooManyRequests("slow down", 1), 3},
		{"an unavailable API server is tried again", apierrors.NewServiceUnavailable("starting"), 3},
		{"a server timeout is tried again", apierrors.NewServerTimeout(gr, "create", 1), 3},
		{"an Event the API server refuses is not tried again", apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, "x", nil), 1},
		{"an Event that already exists is not tried again", apierrors.NewAlreadyExists(gr, "x"), 1},
		{"a request the client cannot build is not tried again", &rest.RequestConstructionError{Err: errors.New("bad")}, 1},
		{"an API server that never answers is given up after maxTries", errors.New("connection refused"), maxTries},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, cs := newRecorder(map[string]int{})
			var calls atomic.Int32
			// The fault is answered until the try that should succeed (a
			// fault that "never" ends is answered every time).
			succeedOn := int32(tc.tries)
			if tc.tries == maxTries {
				succeedOn = maxTries + 1
			}
			cs.PrependReactor("create", "events", func(ktesting.Action) (bool, runtime.Object, error) {
				if calls.Add(1) < succeedOn || tc.tries == 1 {
					return true, nil, tc.err
				}
				return true, &eventsv1.Event{}, nil
			})
			r.Eventf(pod("p"), nil, corev1.EventTypeNormal, "Started", "Start", "")
			r.write(context.Background(), <-r.queue)
			if got := int(calls.Load()); got != tc.tries {
				t.Errorf("%d tries, want %d", got, tc.tries)
			}
		})
	}
}

func TestRepeatedWarningsFoldIntoASeries(t *testing.T) {
	type record struct {
		typ, reason string
		after       time.Duration // since the previous one
	}
	cleanup := func(after time.Duration) record { return record{corev1.EventTypeWarning, "CleanupFailed", after} }
	cases := []struct {
		name string
		recs []record
		// want is, per Event on the server, its series count (0: none).
		want []int32
	}{
		{"a Warning repeated becomes one Event whose series counts the repeats",
			[]record{cleanup(0), cleanup(time.Second), cleanup(time.Second)}, []int32{3}},
		{"Normal Events are never folded: a transition does not repeat",
			[]record{{corev1.EventTypeNormal, "Started", 0}, {corev1.EventTypeNormal, "Started", time.Second}}, []int32{0, 0}},
		{"Warnings of another reason are Events of their own",
			[]record{cleanup(0), {corev1.EventTypeWarning, "CleanupGivenUp", time.Second}}, []int32{0, 0}},
		{"a repeat after the series has ended starts a new Event",
			[]record{cleanup(0), cleanup(time.Second), cleanup(seriesEnd + time.Second)}, []int32{0, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, cs := newRecorder(map[string]int{})
			at := time.Unix(1_800_000_000, 0)
			r.now = func() time.Time { return at }
			for _, rec := range tc.recs {
				at = at.Add(rec.after)
				r.Eventf(pod("run-1"), nil, rec.typ, rec.reason, "Cleanup", "try")
				// One at a time, in order, as a single writer would.
				r.write(context.Background(), <-r.queue)
			}
			list, err := cs.EventsV1().Events("ns").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []int32
			for _, e := range list.Items {
				var n int32
				if e.Series != nil {
					n = e.Series.Count
				}
				got = append(got, n)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("series counts of the Events %v, want %v", got, tc.want)
			}
		})
	}
}

func TestARepeatWhoseFirstEventIsGoneIsCreated(t *testing.T) {
	r, cs := newRecorder(map[string]int{})
	r.Eventf(pod("run-1"), nil, corev1.EventTypeWarning, "CleanupFailed", "Cleanup", "try")
	first := <-r.queue
	r.write(context.Background(), first)
	if err := cs.EventsV1().Events("ns").Delete(context.Background(), first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.Eventf(pod("run-1"), nil, corev1.EventTypeWarning, "CleanupFailed", "Cleanup", "try")
	r.write(context.Background(), <-r.queue)
	ev, err := cs.EventsV1().Events("ns").Get(context.Background(), first.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the repeat was not written: %v", err)
	}
	if ev.Series == nil || ev.Series.Count != 2 {
		t.Errorf("series %v, want a count of 2", ev.Series)
	}
}
