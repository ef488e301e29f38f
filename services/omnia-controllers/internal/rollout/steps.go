package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Timers of the engine. Steps wait on time or metrics, which no watch
// reports, so these are the only requeues the rollout adds.
const (
	// StepRequeue follows a step that advanced, so the next step is
	// evaluated promptly even if no watch event arrives.
	StepRequeue = time.Second
	// MinPauseRequeue is the shortest wait for a running pause; status
	// times have second precision, so a shorter one would wake early.
	MinPauseRequeue = time.Second
	// AnalysisRequeue re-runs an analysis that failed or could not run.
	AnalysisRequeue = 30 * time.Second
	// PromotionRequeue polls the stable Deployment during a promotion.
	PromotionRequeue = 5 * time.Second
)

// Action is what the current step asks of the controller.
type Action int

// Actions.
const (
	// Hold: stay on the step (a pause, a failed or unrunnable analysis).
	Hold Action = iota
	// Advance: the step is done; the next pass runs the next one.
	Advance
	// Analyze: the step is an analysis; run it and evaluate again with
	// its outcome.
	Analyze
	// Promote: every step is done; make the candidate the spec.
	Promote
	// RollBack: the analysis failed and rollback is automatic.
	RollBack
)

// AnalysisOutcome is one run of an analysis step.
type AnalysisOutcome struct {
	// Err is set when the analysis could not run: no template, a bad
	// template, no Prometheus, a failed query, no sample.
	Err error
	// Passed says the success condition held.
	Passed bool
	// Detail describes the observed value.
	Detail string
}

// StepInput is what step evaluation reads.
type StepInput struct {
	// Steps are spec.rollout.steps.
	Steps []omniav1.RolloutStep
	// Prev is status.rollout as last written; nil on the first pass.
	Prev *omniav1.RolloutStatus
	// Rollback is the effective rollback mode.
	Rollback omniav1.RollbackMode
	// Analysis is the outcome of the current analysis step, nil until run.
	Analysis *AnalysisOutcome
	// Now is the time of the pass.
	Now time.Time
}

// Decision is the outcome of one step evaluation.
type Decision struct {
	// Action is what to do.
	Action Action
	// Step is status.rollout.currentStep after this pass.
	Step int32
	// StepStartedAt is when Step began.
	StepStartedAt time.Time
	// Weight is the candidate weight a setWeight step asks for; nil keeps
	// the weight already in effect.
	Weight *int32
	// AnalysisFailed says the rollout holds on a failed analysis.
	AnalysisFailed bool
	// RequeueAfter is the step's timer; 0 for none.
	RequeueAfter time.Duration
	// Message describes the step for status.rollout.message.
	Message string
	// Events are to be emitted on the AgentRuntime.
	Events []kubeutil.Event
}

// CurrentStep is status.rollout.currentStep, 0 before the first pass.
func CurrentStep(prev *omniav1.RolloutStatus) int32 {
	if prev == nil || prev.CurrentStep == nil || *prev.CurrentStep < 0 {
		return 0
	}
	return *prev.CurrentStep
}

// Evaluate runs the current step. The step index and its start time come
// from the previous status, so a step is judged the same however many
// passes it takes; an advancing step starts the next one now.
func Evaluate(in StepInput) Decision {
	idx := CurrentStep(in.Prev)
	started := in.Now
	if in.Prev != nil && in.Prev.StepStartedAt != nil {
		started = in.Prev.StepStartedAt.Time
	}
	hold := Decision{Action: Hold, Step: idx, StepStartedAt: started}
	advance := func(msg string, evs ...kubeutil.Event) Decision {
		return Decision{Action: Advance, Step: idx + 1, StepStartedAt: in.Now, RequeueAfter: StepRequeue, Message: msg, Events: evs}
	}
	if int(idx) >= len(in.Steps) {
		hold.Action, hold.Message = Promote, "all steps done; promoting the candidate"
		return hold
	}
	s := in.Steps[idx]
	switch {
	case s.SetWeight != nil:
		msg := fmt.Sprintf("step %d: candidate weight set to %d%%", idx, *s.SetWeight)
		d := advance(msg, normal(omniav1.EventRolloutStep, msg))
		d.Weight = ptr(*s.SetWeight)
		return d
	case s.Pause != nil && s.Pause.Duration == nil:
		hold.Message = fmt.Sprintf("step %d: paused until spec.rollout is edited", idx)
		return hold
	case s.Pause != nil:
		end := started.Add(s.Pause.Duration.Duration)
		if !in.Now.Before(end) {
			return advance(fmt.Sprintf("step %d: pause of %s over", idx, s.Pause.Duration.Duration))
		}
		hold.RequeueAfter = max(end.Sub(in.Now), MinPauseRequeue)
		hold.Message = fmt.Sprintf("step %d: paused until %s", idx, end.UTC().Format(time.RFC3339))
		return hold
	case s.Analysis != nil:
		return evaluateAnalysis(in, idx, hold, advance)
	}
	// The CRD admits no empty step; one from an older schema is skipped
	// rather than holding the rollout forever.
	return advance(fmt.Sprintf("step %d: empty step skipped", idx))
}

func evaluateAnalysis(in StepInput, idx int32, hold Decision, advance func(string, ...kubeutil.Event) Decision) Decision {
	name := in.Steps[idx].Analysis.TemplateName
	o := in.Analysis
	switch {
	case o == nil:
		hold.Action = Analyze
		return hold
	case o.Err != nil:
		hold.RequeueAfter = AnalysisRequeue
		hold.Message = fmt.Sprintf("step %d: analysis %s could not run: %v", idx, name, o.Err)
		return hold
	case o.Passed:
		msg := fmt.Sprintf("step %d: analysis %s passed (%s)", idx, name, o.Detail)
		return advance(msg, normal(omniav1.EventRolloutAnalysisPassed, msg), normal(omniav1.EventRolloutStep, msg))
	}
	msg := fmt.Sprintf("step %d: analysis %s failed (%s)", idx, name, o.Detail)
	if in.Rollback == omniav1.RollbackAutomatic {
		hold.Action, hold.Message = RollBack, msg
		return hold
	}
	// Manual and disabled both hold: rolling forward past a failed gate
	// would defeat the gate. The observed value goes into the event only:
	// in the status it would change on every run, and each status write
	// brings the agent back, re-running the query ahead of its timer.
	hold.AnalysisFailed = true
	hold.RequeueAfter = AnalysisRequeue
	hold.Message = fmt.Sprintf("step %d: analysis %s failed; re-run every %s", idx, name, AnalysisRequeue)
	hold.Events = []kubeutil.Event{{Type: corev1.EventTypeWarning, Reason: omniav1.EventRolloutAnalysisFailed, Message: msg}}
	return hold
}

// RollbackMode is spec.rollout.rollback.mode, manual when unset.
func RollbackMode(cfg *omniav1.RolloutConfig) omniav1.RollbackMode {
	if cfg == nil || cfg.Rollback == nil || cfg.Rollback.Mode == "" {
		return omniav1.RollbackManual
	}
	return cfg.Rollback.Mode
}

func normal(reason, msg string) kubeutil.Event {
	return kubeutil.Event{Type: corev1.EventTypeNormal, Reason: reason, Message: msg}
}

func ptr[T any](v T) *T { return &v }
