package rollout

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func onStep(i int32, started time.Time, weight int32) *omniav1.RolloutStatus {
	st := metav1.NewTime(started)
	return &omniav1.RolloutStatus{Active: true, CurrentStep: &i, StepStartedAt: &st, CurrentWeight: &weight}
}

func weightStep(w int32) omniav1.RolloutStep { return omniav1.RolloutStep{SetWeight: &w} }

func pauseStep(d time.Duration) omniav1.RolloutStep {
	if d == 0 {
		return omniav1.RolloutStep{Pause: &omniav1.RolloutPause{}}
	}
	return omniav1.RolloutStep{Pause: &omniav1.RolloutPause{Duration: &metav1.Duration{Duration: d}}}
}

func analysisStep() omniav1.RolloutStep {
	return omniav1.RolloutStep{Analysis: &omniav1.RolloutAnalysisStep{TemplateName: "success-rate"}}
}

func TestEvaluate(t *testing.T) {
	steps := []omniav1.RolloutStep{weightStep(20), pauseStep(time.Minute), pauseStep(0), analysisStep()}
	cases := []struct {
		name        string
		in          StepInput
		action      Action
		step        int32
		weight      *int32
		requeue     time.Duration
		stepStarted time.Time
		failed      bool
		events      []string
	}{
		{name: "first pass starts at step 0 and setWeight advances",
			in:     StepInput{Steps: steps, Now: t0},
			action: Advance, step: 1, weight: sp(int32(20)), requeue: StepRequeue, stepStarted: t0, events: []string{omniav1.EventRolloutStep}},
		{name: "timed pause holds until its end and requeues for the time left",
			in:     StepInput{Steps: steps, Prev: onStep(1, t0, 20), Now: t0.Add(20 * time.Second)},
			action: Hold, step: 1, requeue: 40 * time.Second, stepStarted: t0},
		{name: "timed pause requeues at least one second",
			in:     StepInput{Steps: steps, Prev: onStep(1, t0, 20), Now: t0.Add(time.Minute - 100*time.Millisecond)},
			action: Hold, step: 1, requeue: MinPauseRequeue, stepStarted: t0},
		{name: "timed pause advances once elapsed without a step event",
			in:     StepInput{Steps: steps, Prev: onStep(1, t0, 20), Now: t0.Add(time.Minute)},
			action: Advance, step: 2, requeue: StepRequeue, stepStarted: t0.Add(time.Minute)},
		{name: "timed pause without a start time starts now",
			in:     StepInput{Steps: steps, Prev: &omniav1.RolloutStatus{Active: true, CurrentStep: sp(int32(1))}, Now: t0},
			action: Hold, step: 1, requeue: time.Minute, stepStarted: t0},
		{name: "pause without duration holds with no timer",
			in:     StepInput{Steps: steps, Prev: onStep(2, t0, 20), Now: t0.Add(time.Hour)},
			action: Hold, step: 2, stepStarted: t0},
		{name: "analysis step asks for the analysis to run",
			in:     StepInput{Steps: steps, Prev: onStep(3, t0, 20), Now: t0},
			action: Analyze, step: 3, stepStarted: t0},
		{name: "analysis that cannot run holds and retries in 30s",
			in:     StepInput{Steps: steps, Prev: onStep(3, t0, 20), Now: t0, Analysis: &AnalysisOutcome{Err: errors.New("no Prometheus")}},
			action: Hold, step: 3, requeue: AnalysisRequeue, stepStarted: t0},
		{name: "passed analysis advances with a passed event",
			in:     StepInput{Steps: steps, Prev: onStep(3, t0, 20), Now: t0.Add(time.Second), Analysis: &AnalysisOutcome{Passed: true}},
			action: Advance, step: 4, requeue: StepRequeue, stepStarted: t0.Add(time.Second), events: []string{omniav1.EventRolloutAnalysisPassed, omniav1.EventRolloutStep}},
		{name: "failed analysis with automatic rollback rolls back",
			in:     StepInput{Steps: steps, Prev: onStep(3, t0, 20), Now: t0, Rollback: omniav1.RollbackAutomatic, Analysis: &AnalysisOutcome{}},
			action: RollBack, step: 3, stepStarted: t0},
		{name: "failed analysis with manual rollback holds and warns",
			in:     StepInput{Steps: steps, Prev: onStep(3, t0, 20), Now: t0, Rollback: omniav1.RollbackManual, Analysis: &AnalysisOutcome{}},
			action: Hold, step: 3, requeue: AnalysisRequeue, stepStarted: t0, failed: true, events: []string{omniav1.EventRolloutAnalysisFailed}},
		{name: "failed analysis with rollback disabled holds too",
			in:     StepInput{Steps: steps, Prev: onStep(3, t0, 20), Now: t0, Rollback: omniav1.RollbackDisabled, Analysis: &AnalysisOutcome{}},
			action: Hold, step: 3, requeue: AnalysisRequeue, stepStarted: t0, failed: true, events: []string{omniav1.EventRolloutAnalysisFailed}},
		{name: "past the last step promotes",
			in:     StepInput{Steps: steps, Prev: onStep(4, t0, 20), Now: t0},
			action: Promote, step: 4, stepStarted: t0},
		{name: "empty step is skipped",
			in:     StepInput{Steps: []omniav1.RolloutStep{{}}, Now: t0},
			action: Advance, step: 1, requeue: StepRequeue, stepStarted: t0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Evaluate(tc.in)
			if d.Action != tc.action || d.Step != tc.step || d.RequeueAfter != tc.requeue || !d.StepStartedAt.Equal(tc.stepStarted) || d.AnalysisFailed != tc.failed {
				t.Fatalf("decision %+v; want action %v step %d requeue %s started %s failed %v", d, tc.action, tc.step, tc.requeue, tc.stepStarted, tc.failed)
			}
			if (d.Weight == nil) != (tc.weight == nil) || d.Weight != nil && *d.Weight != *tc.weight {
				t.Fatalf("weight %v, want %v", d.Weight, tc.weight)
			}
			if len(d.Events) != len(tc.events) {
				t.Fatalf("events %+v, want %v", d.Events, tc.events)
			}
			for i, e := range d.Events {
				wantType := corev1.EventTypeNormal
				if e.Reason == omniav1.EventRolloutAnalysisFailed {
					wantType = corev1.EventTypeWarning
				}
				if e.Reason != tc.events[i] || e.Type != wantType || e.Message == "" {
					t.Fatalf("event %d %+v, want %s", i, e, tc.events[i])
				}
			}
			if d.Message == "" && d.Action != Analyze {
				t.Fatal("no message")
			}
		})
	}
}

func TestRollbackMode(t *testing.T) {
	cases := []struct {
		name string
		cfg  *omniav1.RolloutConfig
		want omniav1.RollbackMode
	}{
		{"unset rollback is manual", &omniav1.RolloutConfig{}, omniav1.RollbackManual},
		{"empty mode is manual", &omniav1.RolloutConfig{Rollback: &omniav1.RollbackConfig{}}, omniav1.RollbackManual},
		{"automatic is kept", &omniav1.RolloutConfig{Rollback: &omniav1.RollbackConfig{Mode: omniav1.RollbackAutomatic}}, omniav1.RollbackAutomatic},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := RollbackMode(tc.cfg); got != tc.want {
				t.Fatalf("RollbackMode = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestFailedAnalysisMessageIsStable: the held status message does not carry
// the observed value, so re-runs with new values write no new status (a
// status write would bring the agent back ahead of its 30s timer); the
// Warning event does carry it.
func TestFailedAnalysisMessageIsStable(t *testing.T) {
	steps := []omniav1.RolloutStep{analysisStep()}
	run := func(detail string) Decision {
		return Evaluate(StepInput{Steps: steps, Prev: onStep(0, t0, 0), Now: t0, Analysis: &AnalysisOutcome{Detail: detail}})
	}
	a, b := run("result[0] = 0.5"), run("result[0] = 0.6")
	if a.Message != b.Message {
		t.Fatalf("messages differ: %q, %q", a.Message, b.Message)
	}
	if len(a.Events) != 1 || !strings.Contains(a.Events[0].Message, "0.5") {
		t.Fatalf("events %+v", a.Events)
	}
}
