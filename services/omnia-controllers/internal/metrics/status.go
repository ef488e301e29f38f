package metrics

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/rollout"
)

// This file reads the metrics out of the statuses the controllers store.
// It is pure, so each rule is a row of a table test.

// AgentRuntimePass is one pass over an AgentRuntime, as the metrics see
// it. The counters count transitions of the stored status, never passes:
// a pass that stores nothing new (an idle pass, or one whose write failed
// and is retried) counts nothing, and the pass that does store it counts
// it once.
type AgentRuntimePass struct {
	// Before is the status the pass read.
	Before *omniav1.AgentRuntimeStatus
	// After is the status stored when the pass ended: the one it wrote, or
	// the one it read (as its own writes during the pass left it) when it
	// wrote none or its write failed.
	After *omniav1.AgentRuntimeStatus
	// RolledBack says the pass rolled the candidate back: the spec write
	// that reverts it was made. A rollback is counted from the pass's
	// decision rather than the status, since the status recording it can
	// be lost (a failure later in the pass writes none) while the reverted
	// spec stands, and no later pass sees that rollout again.
	RolledBack bool
}

// AgentRuntimeObservation is what one pass sets and counts.
type AgentRuntimeObservation struct {
	// Ready is omnia_agentruntime_ready.
	Ready bool
	// InProgress is omnia_rollout_in_progress.
	InProgress bool
	// CanaryWeight is omnia_rollout_canary_weight.
	CanaryWeight int32
	// Steps is added to omnia_rollout_steps_total.
	Steps int32
	// Finished is the result counted in omnia_rollouts_finished_total, ""
	// for none.
	Finished string
}

// Observe reads what a pass shows: the gauges from After, the counters
// from the change from Before to After.
func (p AgentRuntimePass) Observe() AgentRuntimeObservation {
	var o AgentRuntimeObservation
	var before, after *omniav1.RolloutStatus
	if p.Before != nil {
		before = p.Before.Rollout
	}
	if p.After != nil {
		o.Ready = meta.IsStatusConditionTrue(p.After.Conditions, omniav1.ConditionReady)
		after = p.After.Rollout
	}
	if after != nil && after.Active {
		o.InProgress = true
		if after.CurrentWeight != nil {
			o.CanaryWeight = *after.CurrentWeight
		}
		// A rollout that starts (or restarts, for a new candidate) counts
		// its steps from the first.
		from := int32(0)
		if c := rollout.Continuing(before, after.CandidateVersion); c != nil {
			from = rollout.CurrentStep(c)
		}
		o.Steps = max(rollout.CurrentStep(after)-from, 0)
	}
	switch {
	case p.RolledBack:
		o.Finished = ResultRolledBack
	case before != nil && before.Promoting && after != nil && !after.Active && !after.Promoting:
		// Only a finished promotion leaves the promoting state for a
		// record of the outcome; until that record is stored the next pass
		// finds the promotion under way and finishes it again.
		o.Finished = ResultPromoted
	}
	return o
}

// PromptPackValidated reports whether a PromptPack's conditions say it
// validated: its source and its pack.json (SourceValid and SchemaValid
// True), or, for a live source, whose content the runtime validates when
// it fetches it, its source alone.
func PromptPackValidated(conds []metav1.Condition) bool {
	if !meta.IsStatusConditionTrue(conds, omniav1.ConditionSourceValid) {
		return false
	}
	c := meta.FindStatusCondition(conds, omniav1.ConditionSchemaValid)
	return c != nil && (c.Status == metav1.ConditionTrue || c.Status == metav1.ConditionUnknown && c.Reason == omniav1.ReasonLiveSource)
}

// PromptPackFailures returns the validation stages (StageSource,
// StageSchema) whose condition became False from before to after: a
// failure is counted when it is stored, not on every pass that finds it
// still failing, and again after the stage passed in between.
func PromptPackFailures(before, after []metav1.Condition) []string {
	var out []string
	for _, st := range []struct{ cond, stage string }{{omniav1.ConditionSourceValid, StageSource}, {omniav1.ConditionSchemaValid, StageSchema}} {
		if meta.IsStatusConditionFalse(after, st.cond) && !meta.IsStatusConditionFalse(before, st.cond) {
			out = append(out, st.stage)
		}
	}
	return out
}
