package rollout

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// Continuing returns the previous status.rollout when it describes the
// rollout now in the spec, nil when this pass starts one: after an
// outcome record (promoted, rolled back) or when the candidate was
// replaced mid-rollout, the steps start again from the first.
func Continuing(prev *omniav1.RolloutStatus, candidateVersion string) *omniav1.RolloutStatus {
	if prev == nil || !prev.Active || prev.CandidateVersion != candidateVersion {
		return nil
	}
	return prev
}

// NominalWeight is the candidate weight in effect after d: the step's, or
// else the one already recorded, so a pause or an analysis keeps the
// traffic where the last setWeight put it.
func NominalWeight(prev *omniav1.RolloutStatus, d Decision) int32 {
	if d.Weight != nil {
		return *d.Weight
	}
	if prev != nil && prev.CurrentWeight != nil {
		return *prev.CurrentWeight
	}
	return 0
}

// StatusInput is what a status.rollout of an active rollout is built from.
type StatusInput struct {
	// Prev is the continuing previous status (see Continuing), or nil.
	Prev *omniav1.RolloutStatus
	// Decision is this pass's step decision.
	Decision Decision
	// Weight is the weight to record (Replicas.Weight).
	Weight int32
	// Routing is the routing in effect.
	Routing Routing
	// StableVersion is the stable variant's resolved pack version.
	StableVersion string
	// CandidateVersion names the candidate (see CandidateVersion).
	CandidateVersion string
	// Now is the time of the pass, at second precision.
	Now time.Time
}

// ActiveStatus rebuilds status.rollout for an active rollout from scratch
// each pass, keeping only what must survive passes: when the rollout and
// the current step began.
func ActiveStatus(in StatusInput) *omniav1.RolloutStatus {
	started := metav1.NewTime(in.Now)
	if in.Prev != nil && in.Prev.StartedAt != nil {
		started = *in.Prev.StartedAt
	}
	stepStarted := metav1.NewTime(in.Decision.StepStartedAt)
	return &omniav1.RolloutStatus{
		Active:                true,
		CurrentStep:           ptr(in.Decision.Step),
		CurrentWeight:         ptr(in.Weight),
		StableVersion:         in.StableVersion,
		CandidateVersion:      in.CandidateVersion,
		StartedAt:             &started,
		StepStartedAt:         &stepStarted,
		Message:               in.Decision.Message,
		TrafficRoutingMode:    in.Routing.Mode,
		TrafficWeightEnforced: in.Routing.Enforced,
	}
}

// Outcome is the status.rollout left after a rollout ends: inactive, with
// what happened. It stays until the next rollout starts so the result is
// visible after the candidate Deployment is gone.
func Outcome(msg string) *omniav1.RolloutStatus {
	return &omniav1.RolloutStatus{Active: false, Message: msg}
}
