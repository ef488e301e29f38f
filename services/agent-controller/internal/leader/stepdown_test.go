package leader

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// leaseTraffic sits in front of one replica's clientset: it records every
// Lease request the replica makes and, while refuse is set, answers its
// Lease writes with a 500, as an API server that refuses the renew.
type leaseTraffic struct {
	next   http.RoundTripper
	refuse atomic.Bool
	// beforeWrite, when set, sees each Lease write before it is sent.
	beforeWrite atomic.Pointer[func(*http.Request)]
	mu          sync.Mutex
	log         []string // "GET 200", "PUT 409", ...
}

func (l *leaseTraffic) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.Contains(req.URL.Path, "/leases") {
		return l.next.RoundTrip(req)
	}
	if req.Method == http.MethodPut && l.refuse.Load() {
		l.record(req.Method, http.StatusInternalServerError)
		body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"refused by the test","reason":"InternalError","code":500}`
		return &http.Response{StatusCode: http.StatusInternalServerError, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	}
	if f := l.beforeWrite.Load(); f != nil && req.Method != http.MethodGet {
		(*f)(req)
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		l.record(req.Method, 0)
		return nil, err
	}
	l.record(req.Method, resp.StatusCode)
	return resp, nil
}

func (l *leaseTraffic) record(method string, code int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.log = append(l.log, fmt.Sprintf("%s %d", method, code))
}

func (l *leaseTraffic) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.log...)
}

// stepDown is what a replica saw when the context of its reconcile loop
// ended.
type stepDown struct {
	leader  bool
	metric  float64
	traffic []string
}

type replica struct {
	state   *State
	m       *metrics.Metrics
	traffic *leaseTraffic
	started chan struct{} // a value per OnLeading call
	ended   chan stepDown // a value per OnLeading return
	overlap atomic.Bool   // two OnLeading calls ever ran at once
	active  atomic.Int32
}

// runReplica runs leader election for identity id in ns until the test
// ends.
func runReplica(t *testing.T, ns, id string) *replica {
	t.Helper()
	r := &replica{state: &State{}, m: metrics.New(), traffic: &leaseTraffic{},
		started: make(chan struct{}, 8), ended: make(chan stepDown, 8)}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { r.traffic.next = rt; return r.traffic })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := Run(ctx, Config{
			Client: kube, Namespace: ns, Name: "agent-controller", Identity: id,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
			Log: slog.New(slog.DiscardHandler), State: r.state, Metrics: r.m,
			OnLeading: func(ctx context.Context) {
				if r.active.Add(1) > 1 {
					r.overlap.Store(true)
				}
				defer r.active.Add(-1)
				r.started <- struct{}{}
				<-ctx.Done()
				r.ended <- stepDown{leader: r.state.Leader(), metric: testutil.ToFloat64(r.m.IsLeader), traffic: r.traffic.snapshot()}
			},
		})
		if err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// TestAFailedRenewEndsLeadingAtOnce: the first renew that fails ends this
// replica's leadership: it reports itself a standby before its reconcile
// loop's context ends, and makes no second attempt (no retry, no read of
// the Lease) while still leading.
func TestAFailedRenewEndsLeadingAtOnce(t *testing.T) {
	cases := []struct {
		rule string
		// lose makes the next renew fail, and returns the status it fails with.
		lose func(t *testing.T, ns string, r *replica) int
		// after checks what the replica does once it stepped down.
		after func(t *testing.T, ns string, r *replica)
	}{
		{"a renew the API server refuses ends leading at once", func(t *testing.T, ns string, r *replica) int {
			r.traffic.refuse.Store(true)
			return http.StatusInternalServerError
		}, func(t *testing.T, ns string, r *replica) {
			// The Lease is still its own: once writes go through again it
			// leads again, its previous loop having ended first.
			r.traffic.refuse.Store(false)
			receive(t, r.started, "the replica to lead again")
			if r.overlap.Load() {
				t.Error("a new reconcile loop started before the stepped-down one returned")
			}
			if !r.state.Leader() || testutil.ToFloat64(r.m.IsLeader) != 1 {
				t.Error("leading again is reported")
			}
		}},
		{"a Lease taken by another holder ends leading at once", func(t *testing.T, ns string, r *replica) int {
			leases := env.Kube.CoordinationV1().Leases(ns)
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				l, err := leases.Get(context.Background(), "agent-controller", metav1.GetOptions{})
				if err != nil {
					return err
				}
				l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("rival"), LeaseDurationSeconds: ptr.To[int32](3600),
					AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}}
				_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return http.StatusConflict
		}, func(t *testing.T, ns string, r *replica) {
			// As a standby it reads the rival's valid Lease and leaves it be.
			mark := len(r.traffic.snapshot())
			deadline := time.Now().Add(60 * time.Second)
			for reads := 0; reads < 2; {
				reads = 0
				for _, req := range r.traffic.snapshot()[mark:] {
					if strings.HasPrefix(req, "GET") {
						reads++
					}
				}
				if time.Now().After(deadline) {
					t.Fatal("timed out waiting for the standby to read the Lease")
				}
				time.Sleep(50 * time.Millisecond)
			}
			for _, req := range r.traffic.snapshot()[mark:] {
				if strings.HasPrefix(req, "PUT") {
					t.Errorf("the standby wrote a Lease another holder holds: %v", r.traffic.snapshot()[mark:])
				}
			}
			if r.state.Leader() || len(r.started) > 0 {
				t.Error("the standby leads while another holder holds the Lease")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			ns := env.Namespace(t)
			r := runReplica(t, ns, "replica-a")
			receive(t, r.started, "the replica to lead")
			if !r.state.Leader() || testutil.ToFloat64(r.m.IsLeader) != 1 {
				t.Fatal("a leader reports itself leader")
			}
			mark := len(r.traffic.snapshot())
			code := c.lose(t, ns, r)
			got := receive(t, r.ended, "the reconcile loop's context to end")
			got.traffic = got.traffic[mark:]
			if got.leader || got.metric != 0 {
				t.Errorf("when its loop's context ended the replica still reported itself leader (State %v, controller_is_leader %v)", got.leader, got.metric)
			}
			failed := -1
			for i, req := range got.traffic {
				if !strings.HasSuffix(req, " 200") && !strings.HasSuffix(req, " 201") {
					failed = i
					break
				}
			}
			switch {
			case failed < 0:
				t.Fatalf("the loop ended without a failed renew: %v", got.traffic)
			case got.traffic[failed] != fmt.Sprintf("PUT %d", code):
				t.Errorf("the first failed Lease request is %q, want a renew failing with %d", got.traffic[failed], code)
			case failed != len(got.traffic)-1:
				t.Errorf("after the failed renew the leader went on (%v) instead of stepping down", got.traffic[failed:])
			}
			c.after(t, ns, r)
		})
	}
}
