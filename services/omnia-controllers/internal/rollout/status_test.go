package rollout

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

func TestContinuing(t *testing.T) {
	running := &omniav1.RolloutStatus{Active: true, CandidateVersion: "2.0.0", CurrentStep: sp(int32(3))}
	cases := []struct {
		name string
		prev *omniav1.RolloutStatus
		cand string
		want bool
	}{
		{"no previous status starts a rollout", nil, "2.0.0", false},
		{"same candidate continues", running, "2.0.0", true},
		{"replaced candidate starts again", running, "2.1.0", false},
		{"outcome record starts a new rollout", Outcome("promoted"), "2.0.0", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Continuing(tc.prev, tc.cand) != nil; got != tc.want {
				t.Fatalf("continuing = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNominalWeight(t *testing.T) {
	prev := &omniav1.RolloutStatus{Active: true, CurrentWeight: sp(int32(30))}
	cases := []struct {
		name string
		prev *omniav1.RolloutStatus
		d    Decision
		want int32
	}{
		{"setWeight step sets the weight", prev, Decision{Weight: sp(int32(60))}, 60},
		{"pause or analysis keeps the previous weight", prev, Decision{}, 30},
		{"no weight yet is zero", nil, Decision{}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NominalWeight(tc.prev, tc.d); got != tc.want {
				t.Fatalf("weight %d, want %d", got, tc.want)
			}
		})
	}
}

func TestActiveStatus(t *testing.T) {
	rw := Routing{Mode: omniav1.TrafficRoutingReplicaWeighted}
	t.Run("first pass records the rollout start and every field", func(t *testing.T) {
		st := ActiveStatus(StatusInput{Decision: Decision{Step: 1, StepStartedAt: t0, Message: "m"}, Weight: 50, Routing: rw,
			StableVersion: "1.0.0", CandidateVersion: "2.0.0", Now: t0})
		if !st.Active || *st.CurrentStep != 1 || *st.CurrentWeight != 50 || st.StableVersion != "1.0.0" || st.CandidateVersion != "2.0.0" ||
			!st.StartedAt.Time.Equal(t0) || !st.StepStartedAt.Time.Equal(t0) || st.Message != "m" ||
			st.TrafficRoutingMode != omniav1.TrafficRoutingReplicaWeighted || st.TrafficWeightEnforced || st.Promoting {
			t.Fatalf("status %+v", st)
		}
	})
	t.Run("later passes keep the rollout start", func(t *testing.T) {
		began := metav1.NewTime(t0.Add(-time.Hour))
		st := ActiveStatus(StatusInput{Prev: &omniav1.RolloutStatus{Active: true, StartedAt: &began}, Decision: Decision{StepStartedAt: t0}, Now: t0})
		if !st.StartedAt.Time.Equal(began.Time) {
			t.Fatalf("startedAt %v", st.StartedAt)
		}
	})
	t.Run("no routing records no mode", func(t *testing.T) {
		if st := ActiveStatus(StatusInput{Decision: Decision{StepStartedAt: t0}, Now: t0}); st.TrafficRoutingMode != "" || st.TrafficWeightEnforced {
			t.Fatalf("status %+v", st)
		}
	})
	t.Run("outcome is inactive with its message", func(t *testing.T) {
		if o := Outcome("promoted"); o.Active || o.Message != "promoted" || o.CurrentStep != nil {
			t.Fatalf("outcome %+v", o)
		}
	})
}
