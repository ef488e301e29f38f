package rollout

import (
	"testing"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

func TestResolveRouting(t *testing.T) {
	cases := []struct {
		name     string
		cfg      *omniav1.TrafficRoutingConfig
		mode     omniav1.TrafficRoutingMode
		degraded bool
	}{
		{"no trafficRouting means no weighting", nil, "", false},
		{"replicaWeighted is honoured", &omniav1.TrafficRoutingConfig{Mode: omniav1.TrafficRoutingReplicaWeighted}, omniav1.TrafficRoutingReplicaWeighted, false},
		{"mesh without a mesh degrades to replicaWeighted", &omniav1.TrafficRoutingConfig{Mode: omniav1.TrafficRoutingMesh}, omniav1.TrafficRoutingReplicaWeighted, true},
		{"external without Istio degrades to replicaWeighted", &omniav1.TrafficRoutingConfig{Mode: omniav1.TrafficRoutingExternal}, omniav1.TrafficRoutingReplicaWeighted, true},
		{"unset mode with istio means external and degrades", &omniav1.TrafficRoutingConfig{Istio: &omniav1.IstioTrafficRouting{}}, omniav1.TrafficRoutingReplicaWeighted, true},
		{"unset mode without istio is replicaWeighted", &omniav1.TrafficRoutingConfig{}, omniav1.TrafficRoutingReplicaWeighted, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ResolveRouting(tc.cfg)
			if r.Mode != tc.mode || (r.Degraded != "") != tc.degraded || r.Enforced {
				t.Fatalf("routing %+v; want mode %q degraded %v, never enforced", r, tc.mode, tc.degraded)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	cases := []struct {
		name                         string
		total, weight                int32
		stable, candidate, delivered int32
	}{
		{"half of four is two each", 4, 50, 2, 2, 50},
		{"candidate share is rounded", 3, 50, 1, 2, 67},
		{"small weight may round to no candidate", 4, 10, 4, 0, 0},
		{"zero weight keeps all stable", 5, 0, 5, 0, 0},
		{"full weight moves all to candidate", 5, 100, 0, 5, 100},
		{"one replica below 50 stays stable", 1, 49, 1, 0, 0},
		{"one replica at 50 goes to the candidate", 1, 50, 0, 1, 100},
		{"zero replicas count as one", 0, 80, 0, 1, 100},
		{"delivered weight splits to the same replicas again", 3, 67, 1, 2, 67},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, c, d := Split(tc.total, tc.weight)
			if s != tc.stable || c != tc.candidate || d != tc.delivered {
				t.Fatalf("Split(%d, %d) = %d, %d, %d; want %d, %d, %d", tc.total, tc.weight, s, c, d, tc.stable, tc.candidate, tc.delivered)
			}
		})
	}
}

func TestPlanReplicas(t *testing.T) {
	rw := Routing{Mode: omniav1.TrafficRoutingReplicaWeighted}
	cases := []struct {
		name               string
		routing            Routing
		total, weight      int32
		autoscaled         bool
		stable, candidate  *int32
		weight2record      int32
		stableUntouched    bool
		candidateUntouched bool
	}{
		{name: "no routing runs both in full and records the step weight", routing: Routing{}, total: 4, weight: 30,
			weight2record: 30, stableUntouched: true, candidateUntouched: true},
		{name: "replicaWeighted splits and records the delivered weight", routing: rw, total: 3, weight: 50,
			stable: sp(int32(1)), candidate: sp(int32(2)), weight2record: 67},
		{name: "autoscaled stable keeps its autoscaler's count", routing: rw, total: 4, weight: 50, autoscaled: true,
			candidate: sp(int32(2)), weight2record: 50, stableUntouched: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanReplicas(tc.routing, tc.total, tc.weight, tc.autoscaled)
			if p.Weight != tc.weight2record {
				t.Fatalf("weight %d, want %d", p.Weight, tc.weight2record)
			}
			if tc.stableUntouched != (p.Stable == nil) || p.Stable != nil && *p.Stable != *tc.stable {
				t.Fatalf("stable %v, want %v", p.Stable, tc.stable)
			}
			if tc.candidateUntouched != (p.Candidate == nil) || p.Candidate != nil && *p.Candidate != *tc.candidate {
				t.Fatalf("candidate %v, want %v", p.Candidate, tc.candidate)
			}
		})
	}
}
