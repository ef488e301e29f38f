package leader

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

type fakeCtl struct{ synced, healthy bool }

func (f fakeCtl) Synced() bool  { return f.synced }
func (f fakeCtl) Healthy() bool { return f.healthy }

func TestReadiness(t *testing.T) {
	cases := []struct {
		rule   string
		leader bool
		ctl    Controller
		want   bool
	}{
		{"a standby is ready: healthy and waiting", false, nil, true},
		{"a leader without a running loop is not ready", true, nil, false},
		{"a leader is not ready until its cache synced", true, fakeCtl{synced: false, healthy: true}, false},
		{"a leader whose poll keeps failing is not ready", true, fakeCtl{synced: true, healthy: false}, false},
		{"a synced, healthy leader is ready", true, fakeCtl{synced: true, healthy: true}, true},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			s := &State{}
			s.SetLeader(c.leader)
			s.SetController(c.ctl)
			if ok, why := s.Ready(); ok != c.want || (!ok && why == "") {
				t.Errorf("Ready() = %v %q, want %v with a reason when not ready", ok, why, c.want)
			}
		})
	}
}

// TestWithoutElectionTheReplicaReportsLeading: a replica run with
// --leader-elect=false reconciles, so it is the leader for readiness and
// controller_is_leader while it does, and stops being one when it stops.
func TestWithoutElectionTheReplicaReportsLeading(t *testing.T) {
	m, state := metrics.New(), &State{}
	var during float64
	var leading bool
	RunWithoutElection(context.Background(), Config{State: state, Metrics: m, OnLeading: func(context.Context) {
		during, leading = testutil.ToFloat64(m.IsLeader), state.Leader()
	}})
	if during != 1 || !leading {
		t.Errorf("while reconciling without election: controller_is_leader %v, State leader %v; want 1, true", during, leading)
	}
	if after := testutil.ToFloat64(m.IsLeader); after != 0 || state.Leader() {
		t.Errorf("after the loop returned: controller_is_leader %v, State leader %v; want 0, false", after, state.Leader())
	}
}
