package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// refusingClient is the controller's view of an API server that refuses
// every LIST, or every watch, and records when each was tried, per kind.
// Every other call panics (the embedded interface is nil): with no objects
// there is nothing to reconcile, so nothing else is called.
type refusingClient struct {
	client.WithWatch
	// refuseList refuses LISTs; otherwise LISTs answer empty and watches
	// are refused with watchErr.
	refuseList bool
	watchErr   error
	// stop ends the run should the controller retry without waiting, so
	// a hot loop fails the test instead of hanging it.
	stop context.CancelFunc

	mu       sync.Mutex
	attempts map[string][]time.Time // by list kind: "AgentList", "JobList", ...
}

// hotLoop is more attempts of one kind than any backoff makes in the
// observed time.
const hotLoop = 200

func (r *refusingClient) attempt(list client.ObjectList) {
	kind := list.GetObjectKind().GroupVersionKind().Kind
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts[kind] = append(r.attempts[kind], time.Now())
	if len(r.attempts[kind]) > hotLoop {
		r.stop()
	}
}

func (r *refusingClient) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if r.refuseList {
		r.attempt(list)
		return apierrors.NewInternalError(errors.New("refused by the test"))
	}
	list.SetResourceVersion("1")
	return nil
}

func (r *refusingClient) Watch(_ context.Context, list client.ObjectList, _ ...client.ListOption) (watch.Interface, error) {
	if r.refuseList {
		return watch.NewFake(), nil
	}
	r.attempt(list)
	return nil, r.watchErr
}

// waits returns the gaps between consecutive attempts of each kind.
func (r *refusingClient) waits() map[string][]time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]time.Duration{}
	for kind, at := range r.attempts {
		for i := 1; i < len(at); i++ {
			out[kind] = append(out[kind], at[i].Sub(at[i-1]))
		}
	}
	return out
}

// TestTheWatchLoopBacksOffWithJitter: while the API server refuses the
// controller's LISTs or watches, each watched kind is retried after waits
// that grow, never exceed a minute (a recovered API server is seen within
// one), and are jittered, so replicas, and the informers of one replica,
// do not retry in lockstep. Time is the fake clock of a synctest bubble,
// so minutes of failures take no real time; the waits are observed from
// the attempts the API server sees.
func TestTheWatchLoopBacksOffWithJitter(t *testing.T) {
	const (
		observe = 5 * time.Minute
		// maxWait bounds every wait between two attempts.
		maxWait = time.Minute
		// grows is how many of the first waits must each be longer than
		// the one before.
		grows = 4
		// lockstep is how close two waits are taken to be the same: the
		// error handler of client-go may add a millisecond.
		lockstep = 10 * time.Millisecond
	)
	cases := []struct {
		rule       string
		refuseList bool
		watchErr   error
	}{
		{"a refused LIST is retried after growing, bounded, jittered waits", true, nil},
		{"a refused watch is re-listed and re-opened after growing, bounded, jittered waits", false,
			apierrors.NewInternalError(errors.New("refused by the test"))},
		{"a watch refused with 429 is re-opened after growing, bounded, jittered waits", false,
			apierrors.NewTooManyRequests("refused by the test", 0)},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// client-go rate-limits handled errors against the time of
				// the last one, process-wide. One handled first, at the
				// bubble's fake time (in 2000), makes the errors below count
				// from there, and leaves that time in the past for the
				// tests that follow on the real clock; its handler sleeps
				// out the difference off to the side, until the end.
				aligned := make(chan struct{})
				go func() {
					defer close(aligned)
					utilruntime.HandleError(errors.New("aligning client-go's error rate limit with the fake clock"))
				}()
				synctest.Wait()
				defer func() { <-aligned }()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				// Two replicas, as if both led at once: only jitter keeps
				// them apart.
				replicas := []*refusingClient{}
				var wg sync.WaitGroup
				for range 2 {
					r := &refusingClient{refuseList: c.refuseList, watchErr: c.watchErr, stop: cancel, attempts: map[string][]time.Time{}}
					replicas = append(replicas, r)
					ctl := New(r, nil, metrics.New(), Options{Log: quiet})
					wg.Go(func() { _ = ctl.Run(ctx) })
				}
				time.Sleep(observe)
				cancel()
				wg.Wait()

				var all [][]time.Duration
				var names []string
				for i, r := range replicas {
					waits := r.waits()
					for _, kind := range []string{"AgentList", "JobList", "StationList", "AgentDefinitionList"} {
						w := waits[kind]
						name := fmt.Sprintf("replica %d, %s", i, kind)
						if len(w) > hotLoop {
							t.Fatalf("%s: %d attempts in %s, the first waits %v: retried without backing off", name, len(w)+1, observe, w[:grows])
						}
						if len(w) < grows+1 {
							t.Fatalf("%s: %d attempts in %s, want more than %d", name, len(w)+1, observe, grows+1)
						}
						for j := 1; j < grows; j++ {
							if w[j] <= w[j-1] {
								t.Errorf("%s: waits %v do not grow", name, w[:grows])
								break
							}
						}
						for _, d := range w {
							if d > maxWait {
								t.Errorf("%s: waited %s between two attempts, want at most %s: %v", name, d, maxWait, w)
								break
							}
						}
						all, names = append(all, w), append(names, name)
					}
				}
				for i := range all {
					for j := i + 1; j < len(all); j++ {
						if sameWaits(all[i], all[j], lockstep) {
							t.Errorf("%s and %s retry in lockstep (no jitter): %v", names[i], names[j], all[i])
						}
					}
				}
			})
		})
	}
}

// sameWaits reports whether a and b agree within tolerance on every wait
// both hold.
func sameWaits(a, b []time.Duration, tolerance time.Duration) bool {
	for i := range min(len(a), len(b)) {
		if d := a[i] - b[i]; d > tolerance || d < -tolerance {
			return false
		}
	}
	return true
}
