package leader

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// rivalLease creates the agent-controller Lease in ns held by holder, with
// a LeaseDurationSeconds of seconds and a renewTime renewOffset from now,
// as written by a holder whose clock is off by renewOffset.
func rivalLease(t *testing.T, ns, holder string, seconds int32, renewOffset time.Duration) *coordinationv1.Lease {
	t.Helper()
	at := &metav1.MicroTime{Time: time.Now().Add(renewOffset)}
	l, err := env.Kube.CoordinationV1().Leases(ns).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-controller", Namespace: ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(seconds),
			AcquireTime: at, RenewTime: at, LeaseTransitions: ptr.To[int32](0)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLeaseExpiryIsJudgedOnTheStandbysClock: a standby takes over a Lease
// only once it has seen it unchanged for LeaseDuration, measured on its own
// clock from when it saw the last change. The holder's renewTime, written
// on the holder's clock, counts for nothing: a holder whose clock lags
// keeps the Lease for as long as it keeps renewing, and a Lease whose
// renewTime lies ahead still expires once it stops changing.
func TestLeaseExpiryIsJudgedOnTheStandbysClock(t *testing.T) {
	const leaseDuration = 3 * time.Second
	cases := []struct {
		rule string
		// renewOffset is how far the rival's clock, and so every renewTime
		// it writes, is off.
		renewOffset time.Duration
		// renewFor is how long the rival keeps renewing once the standby
		// runs.
		renewFor time.Duration
	}{
		{"a Lease that keeps changing is not taken over however old its renewTime", -time.Hour, 4 * leaseDuration},
		{"a Lease that stopped changing is taken over after LeaseDuration however far ahead its renewTime", time.Hour, 0},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			ns := env.Namespace(t)
			leases := env.Kube.CoordinationV1().Leases(ns)
			lease := rivalLease(t, ns, "rival", int32(leaseDuration/time.Second), c.renewOffset)
			lastWrite := time.Now()
			r := runReplica(t, ns, "replica-a")
			for until := time.Now().Add(c.renewFor); time.Now().Before(until); {
				time.Sleep(300 * time.Millisecond)
				// The standby writes nothing while the rival renews, so
				// the rival's update never conflicts.
				lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(c.renewOffset)}
				var err error
				if lease, err = leases.Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
					t.Fatalf("the rival's renew failed (the standby wrote the Lease?): %v", err)
				}
				lastWrite = time.Now()
				if len(r.started) > 0 || r.state.Leader() {
					t.Fatalf("the standby took over a Lease renewed %s ago on the standby's clock", time.Since(lastWrite))
				}
			}
			receive(t, r.started, "the standby to take over the Lease once it stopped changing")
			if waited := time.Since(lastWrite); waited < leaseDuration {
				t.Errorf("the standby took over %s after the Lease last changed, before its LeaseDuration %s", waited, leaseDuration)
			}
			got, err := leases.Get(context.Background(), "agent-controller", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if h := ptr.Deref(got.Spec.HolderIdentity, ""); h != "replica-a" {
				t.Errorf("the Lease is held by %q after the takeover", h)
			}
		})
	}
}

// writeRace holds the first Lease write of each of n replicas until all n
// have sent theirs, then lets them go at once: each was computed from the
// Lease as it stood before any of them landed.
type writeRace struct {
	n    int
	mu   sync.Mutex
	rvs  map[string]string // replica → resourceVersion its held write carried
	all  chan struct{}
	done bool
}

func newWriteRace(n int) *writeRace {
	return &writeRace{n: n, rvs: map[string]string{}, all: make(chan struct{})}
}

// install puts the race in front of r's Lease writes.
func (w *writeRace) install(id string, r *replica) {
	var once sync.Once
	hold := func(req *http.Request) {
		once.Do(func() {
			rv := "?"
			if req.GetBody != nil {
				if body, err := req.GetBody(); err == nil {
					raw, _ := io.ReadAll(body)
					// JSON or protobuf, whichever the client sent.
					var l coordinationv1.Lease
					if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, &l); err == nil {
						rv = l.ResourceVersion
					}
				}
			}
			w.mu.Lock()
			w.rvs[id] = rv
			if len(w.rvs) == w.n && !w.done {
				w.done = true
				close(w.all)
			}
			w.mu.Unlock()
			select {
			case <-w.all:
			case <-time.After(time.Second):
				// Within the write's RenewDeadline; the test fails on the
				// missing write below.
			}
		})
	}
	r.traffic.beforeWrite.Store(&hold)
}

func (w *writeRace) held() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]string{}
	for k, v := range w.rvs {
		out[k] = v
	}
	return out
}

// TestContendingStandbysCannotBothWin: two standbys that find the same
// Lease expired both write it, each carrying the resourceVersion it read;
// the API server applies one and refuses the other with a conflict, so
// exactly one leads. The writes are held until both are in flight, so the
// race is run every time rather than left to timing: it is the guard that
// decides, not luck.
func TestContendingStandbysCannotBothWin(t *testing.T) {
	ns := env.Namespace(t)
	// Expired once unchanged for a second: no replica writes before the
	// race is installed below.
	expired := rivalLease(t, ns, "gone", 1, 0)
	ids := []string{"replica-a", "replica-b"}
	race := newWriteRace(len(ids))
	reps := map[string]*replica{}
	for _, id := range ids {
		reps[id] = runReplica(t, ns, id)
		race.install(id, reps[id])
	}
	var winner string
	select {
	case <-reps["replica-a"].started:
		winner = "replica-a"
	case <-reps["replica-b"].started:
		winner = "replica-b"
	case <-time.After(60 * time.Second):
		t.Fatal("timed out waiting for a standby to take over the expired Lease")
	}
	loser := ids[0]
	if loser == winner {
		loser = ids[1]
	}
	// The winner renews every RetryPeriod: the loser sees the Lease change
	// and stays a standby for as long as the test looks, well past the
	// winner's LeaseDuration.
	time.Sleep(5 * time.Second)

	held := race.held()
	cases := []struct {
		rule string
		ok   bool
		why  func() any
	}{
		{"both standbys wrote the Lease while neither write had landed", len(held) == 2,
			func() any { return held }},
		{"both writes carried the resourceVersion both standbys read", held[winner] == expired.ResourceVersion && held[loser] == expired.ResourceVersion,
			func() any { return map[string]any{"writes": held, "read": expired.ResourceVersion} }},
		{"the stale write is refused with a conflict", slices.Contains(reps[loser].traffic.snapshot(), "PUT 409"),
			func() any { return reps[loser].traffic.snapshot() }},
		{"exactly one standby leads", len(reps[loser].started) == 0 && !reps[loser].state.Leader() && reps[winner].state.Leader(),
			func() any {
				return map[string]bool{winner: reps[winner].state.Leader(), loser: reps[loser].state.Leader()}
			}},
		{"the Lease names the winner, taken over once", leaseIs(t, ns, winner, ptr.Deref(expired.Spec.LeaseTransitions, 0)+1),
			func() any { return winner }},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if !c.ok {
				t.Errorf("winner %s, loser %s: %v", winner, loser, c.why())
			}
		})
	}
}

// leaseIs reports whether the agent-controller Lease of ns is held by
// holder after transitions takeovers.
func leaseIs(t *testing.T, ns, holder string, transitions int32) bool {
	t.Helper()
	l, err := env.Kube.CoordinationV1().Leases(ns).Get(context.Background(), "agent-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "") == holder && ptr.Deref(l.Spec.LeaseTransitions, 0) == transitions
}
