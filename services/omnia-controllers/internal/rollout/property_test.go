package rollout

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	pt "github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

// genSteps draws spec.rollout.steps as the CRD admits them (one to a few
// steps, each one of setWeight 0-100, a pause with or without a duration,
// an analysis), now and then with the empty step of an older schema.
func genSteps(r *rand.Rand) []omniav1.RolloutStep {
	steps := make([]omniav1.RolloutStep, 1+r.IntN(6))
	for i := range steps {
		switch r.IntN(8) {
		case 0, 1:
			steps[i].SetWeight = pt.Ptr(int32(pt.Pick(r, 0, 1, 33, 50, 99, 100, r.IntN(101))))
		case 2:
			steps[i].Pause = &omniav1.RolloutPause{}
		case 3, 4:
			steps[i].Pause = &omniav1.RolloutPause{Duration: &metav1.Duration{Duration: pt.Duration(r)}}
		case 5, 6:
			steps[i].Analysis = &omniav1.RolloutAnalysisStep{TemplateName: "success-rate"}
		default:
			if pt.Chance(r, 0.3) {
				break // an empty step, from an older schema
			}
			steps[i].SetWeight = pt.Ptr(int32(r.IntN(101)))
		}
	}
	return steps
}

// genPrev draws a stored status.rollout: none, or one in any state, the
// step index sometimes past the last step or negative.
func genPrev(r *rand.Rand, steps int, now time.Time) *omniav1.RolloutStatus {
	if pt.Chance(r, 0.2) {
		return nil
	}
	p := &omniav1.RolloutStatus{Active: pt.Chance(r, 0.8), CandidateVersion: pt.Pick(r, "1.1.0", "2.0.0")}
	if pt.Chance(r, 0.9) {
		p.CurrentStep = pt.Ptr(int32(r.IntN(steps+2) - pt.Pick(r, 0, 0, 0, 1)))
	}
	if pt.Chance(r, 0.8) {
		p.CurrentWeight = pt.Ptr(int32(r.IntN(101)))
	}
	if pt.Chance(r, 0.9) {
		p.StepStartedAt = pt.Ptr(metav1.NewTime(now.Add(-time.Duration(r.IntN(7200)) * time.Second)))
	}
	if pt.Chance(r, 0.9) {
		p.StartedAt = pt.Ptr(metav1.NewTime(now.Add(-time.Duration(r.IntN(86400)) * time.Second)))
	}
	return p
}

func genAnalysis(r *rand.Rand) *AnalysisOutcome {
	switch r.IntN(3) {
	case 0:
		return &AnalysisOutcome{Err: pt.Pick(r, errors.New("the operator has no Prometheus configured"), errors.New(`RolloutAnalysis "success-rate" not found`))}
	case 1:
		return &AnalysisOutcome{Passed: true, Detail: fmt.Sprintf("result[0] >= 0.95 with result[0] = 0.9%d", r.IntN(10))}
	}
	return &AnalysisOutcome{Detail: fmt.Sprintf("result[0] >= 0.95 with result[0] = 0.%d", r.IntN(90))}
}

// TestEvaluateProperties checks Evaluate and ActiveStatus, the step
// engine, on random steps, stored progress, analysis outcomes, rollback
// modes and times:
//
//   - no input makes them panic, and the same input gives the same
//     decision;
//   - a decision asks for no timer or one of at least a second (the
//     precision of the stored times): a timed pause that is not over
//     waits at least until its end, a failed or unrunnable analysis
//     AnalysisRequeue; only an untimed pause, an analysis still to run, a
//     promotion and a rollback ask for none, since each is ended by a
//     watch event or by the action itself;
//   - a step either holds where it is, its start kept, or advances by one,
//     starting now; past the last step the decision is Promote;
//   - the status.rollout a holding pass writes, stored and evaluated again
//     (at the same time, and for a pause later but before its end, and
//     for a failed analysis with another observed value) is written again
//     unchanged.
func TestEvaluateProperties(t *testing.T) {
	counts := pt.Counts{}
	pt.Run(t, func(r *rand.Rand) error {
		now := pt.Time(r)
		in := StepInput{Steps: genSteps(r), Rollback: pt.Pick(r, omniav1.RollbackAutomatic, omniav1.RollbackManual, omniav1.RollbackDisabled), Now: now}
		in.Prev = Continuing(genPrev(r, len(in.Steps), now), "1.1.0")
		d := Evaluate(in)
		if d.Action == Analyze {
			counts.Add("analyze")
			in.Analysis = genAnalysis(r)
			d = Evaluate(in)
			if d.Action == Analyze {
				return errors.New("asks for an analysis again with its outcome at hand")
			}
		}
		if again := Evaluate(in); !reflect.DeepEqual(d, again) {
			return fmt.Errorf("two decisions on one input differ: %s", pt.Diff(d, again))
		}
		if err := checkDecision(in, d); err != nil {
			return err
		}
		counts.Add(actionName[d.Action])
		if d.Action != Hold {
			return nil
		}
		return checkHoldIsStable(r, in, d, counts)
	})
	counts.Require(t, 0.02, "hold", "advance", "promote", "rollback", "analyze", "hold on a timed pause", "hold on a failed analysis")
}

var actionName = map[Action]string{Hold: "hold", Advance: "advance", Analyze: "analyze", Promote: "promote", RollBack: "rollback"}

func checkDecision(in StepInput, d Decision) error {
	idx := CurrentStep(in.Prev)
	started := in.Now
	if in.Prev != nil && in.Prev.StepStartedAt != nil {
		started = in.Prev.StepStartedAt.Time
	}
	if d.RequeueAfter < 0 || d.RequeueAfter > 0 && d.RequeueAfter < time.Second {
		return fmt.Errorf("requeue after %s: under the one second floor", d.RequeueAfter)
	}
	switch d.Action {
	case Advance:
		if d.Step != idx+1 || !d.StepStartedAt.Equal(in.Now) || d.RequeueAfter != StepRequeue {
			return fmt.Errorf("advance from step %d to %d started %s, requeue %s", idx, d.Step, d.StepStartedAt, d.RequeueAfter)
		}
	case Hold, Promote, RollBack:
		if d.Step != idx || !d.StepStartedAt.Equal(started) {
			return fmt.Errorf("%s moves step %d to %d or its start from %s to %s", actionName[d.Action], idx, d.Step, started, d.StepStartedAt)
		}
	}
	if (d.Action == Promote) != (int(idx) >= len(in.Steps)) {
		return fmt.Errorf("action %s on step %d of %d", actionName[d.Action], idx, len(in.Steps))
	}
	if d.Weight != nil && (*d.Weight < 0 || *d.Weight > 100) {
		return fmt.Errorf("weight %d", *d.Weight)
	}
	if d.Action != Hold || int(idx) >= len(in.Steps) {
		return nil
	}
	s := in.Steps[idx]
	switch {
	case s.Pause != nil && s.Pause.Duration == nil:
		if d.RequeueAfter != 0 {
			return fmt.Errorf("an untimed pause requeues after %s", d.RequeueAfter)
		}
	case s.Pause != nil:
		if end := started.Add(s.Pause.Duration.Duration); in.Now.Add(d.RequeueAfter).Before(end) {
			return fmt.Errorf("a pause ending at %s wakes at %s", end, in.Now.Add(d.RequeueAfter))
		}
	case s.Analysis != nil:
		if d.RequeueAfter != AnalysisRequeue {
			return fmt.Errorf("a held analysis requeues after %s, want %s", d.RequeueAfter, AnalysisRequeue)
		}
	default:
		return fmt.Errorf("holds on step %+v", s)
	}
	return nil
}

// checkHoldIsStable writes status.rollout as the controller does for a
// holding pass, stores it, and evaluates again.
func checkHoldIsStable(r *rand.Rand, in StepInput, d Decision, counts pt.Counts) error {
	routing := ResolveRouting(pt.Pick(r, nil, &omniav1.TrafficRoutingConfig{Mode: omniav1.TrafficRoutingReplicaWeighted},
		&omniav1.TrafficRoutingConfig{Mode: omniav1.TrafficRoutingMesh}))
	total, autoscaled := int32(r.IntN(12)), pt.Chance(r, 0.3)
	write := func(in StepInput, d Decision) (*omniav1.RolloutStatus, error) {
		plan := PlanReplicas(routing, total, NominalWeight(in.Prev, d), autoscaled)
		st := ActiveStatus(StatusInput{Prev: in.Prev, Decision: d, Weight: plan.Weight, Routing: routing,
			StableVersion: "1.0.0", CandidateVersion: "1.1.0", Now: in.Now})
		return pt.Stored(st)
	}
	first, err := write(in, d)
	if err != nil {
		return err
	}
	next := func(now time.Time, analysis *AnalysisOutcome) error {
		in2 := in
		in2.Prev, in2.Now, in2.Analysis = Continuing(first, "1.1.0"), now, analysis
		d2 := Evaluate(in2)
		if d2.Action != Hold {
			return fmt.Errorf("a hold becomes %s on the status it wrote", actionName[d2.Action])
		}
		second, err := write(in2, d2)
		if err != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(first, second) {
			return fmt.Errorf("a holding pass rewrites status.rollout: %s", pt.Diff(first, second))
		}
		return nil
	}
	if err := next(in.Now, in.Analysis); err != nil {
		return err
	}
	s := in.Steps[CurrentStep(in.Prev)]
	switch {
	case s.Pause != nil && s.Pause.Duration != nil:
		counts.Add("hold on a timed pause")
		end := first.StepStartedAt.Add(s.Pause.Duration.Duration)
		if later := in.Now.Add(time.Duration(r.Int64N(int64(end.Sub(in.Now)/time.Second)+1)) * time.Second); later.Before(end) {
			return next(later, nil)
		}
	case s.Analysis != nil && in.Analysis != nil && in.Analysis.Err == nil:
		counts.Add("hold on a failed analysis")
		return next(in.Now.Add(AnalysisRequeue), &AnalysisOutcome{Detail: "result[0] >= 0.95 with result[0] = 0.5"})
	}
	return nil
}

// TestReplicaProperties checks Split and PlanReplicas for every replica
// count and weight: the two variants share the replicas exactly, the
// delivered weight is a percentage that a second split reproduces (so a
// holding rollout, which splits again from the recorded weight, moves no
// replica), the candidate share never shrinks as the weight grows, and an
// autoscaled stable Deployment keeps its own count.
func TestReplicaProperties(t *testing.T) {
	for total := int32(0); total <= 300; total++ {
		var lastCand int32
		for w := int32(-5); w <= 105; w++ {
			s, c, delivered := Split(total, w)
			if s < 0 || c < 0 || s+c != max(total, 1) {
				t.Fatalf("Split(%d, %d) = %d + %d", total, w, s, c)
			}
			if delivered < 0 || delivered > 100 {
				t.Fatalf("Split(%d, %d) delivers %d%%", total, w, delivered)
			}
			if w <= 0 && c != 0 || w >= 100 && s != 0 {
				t.Fatalf("Split(%d, %d) = %d + %d", total, w, s, c)
			}
			if c < lastCand {
				t.Fatalf("Split(%d, %d) gives the candidate %d, fewer than at the weight before (%d)", total, w, c, lastCand)
			}
			lastCand = c
			if s2, c2, d2 := Split(total, delivered); s2 != s || c2 != c || d2 != delivered {
				t.Fatalf("Split(%d, %d) = %d+%d at %d%%, but split again at %d%%: %d+%d at %d%%", total, w, s, c, delivered, delivered, s2, c2, d2)
			}
			rw := Routing{Mode: omniav1.TrafficRoutingReplicaWeighted}
			if p := PlanReplicas(rw, total, w, true); p.Stable != nil || p.Candidate == nil || *p.Candidate != c || p.Weight != delivered {
				t.Fatalf("PlanReplicas autoscaled(%d, %d) = %+v", total, w, p)
			}
			if p := PlanReplicas(Routing{}, total, w, false); p.Stable != nil || p.Candidate != nil || p.Weight != w {
				t.Fatalf("PlanReplicas without routing (%d, %d) = %+v", total, w, p)
			}
		}
	}
}

// genSpec draws an AgentRuntime spec's references and its rollout
// candidate, as the CRD admits them.
func genSpec(r *rand.Rand) *omniav1.AgentRuntimeSpec {
	ref := func() omniav1.PromptPackRef {
		p := omniav1.PromptPackRef{Name: pt.Pick(r, "support", "support", "other")}
		switch r.IntN(3) {
		case 0:
			p.Version = pt.Ptr(pt.Pick(r, "1.0.0", "v1.0.0", "1.1.0", "2.0.0-rc.1"))
		case 1:
			p.Track = pt.Ptr(pt.Pick(r, omniav1.ChannelStable, omniav1.ChannelPrerelease))
		}
		return p
	}
	provs := func() []omniav1.NamedProviderRef {
		var out []omniav1.NamedProviderRef
		for _, n := range []string{"llm", "embed"} {
			if pt.Chance(r, 0.6) {
				out = append(out, omniav1.NamedProviderRef{Name: n, ProviderRef: omniav1.ProviderRef{Name: pt.Pick(r, "p1", "p2")}})
			}
		}
		return out
	}
	tools := func() *omniav1.ToolRegistryRef {
		if pt.Chance(r, 0.5) {
			return nil
		}
		return &omniav1.ToolRegistryRef{Name: pt.Pick(r, "tools", "tools-v2")}
	}
	spec := &omniav1.AgentRuntimeSpec{PromptPackRef: ref(), Providers: provs(), ToolRegistryRef: tools()}
	if pt.Chance(r, 0.9) {
		spec.Rollout = &omniav1.RolloutConfig{Steps: genSteps(r)}
		if pt.Chance(r, 0.85) {
			c := &omniav1.CandidateOverrides{}
			if pt.Chance(r, 0.7) {
				c.PromptPackRef = pt.Ptr(ref())
			}
			if pt.Chance(r, 0.3) {
				c.ProviderRefs = provs()
			}
			if pt.Chance(r, 0.3) {
				c.ToolRegistryRef = tools()
			}
			spec.Rollout.Candidate = c
		}
		if pt.Chance(r, 0.4) {
			spec.Rollout.Trigger = &omniav1.RolloutTrigger{PromptPackChannel: pt.Pick(r, omniav1.ChannelStable, omniav1.ChannelPrerelease)}
			// Admission requires a version pin with a trigger, and a
			// trigger usually waits with no candidate set.
			spec.PromptPackRef.Track = nil
			spec.PromptPackRef.Version = pt.Ptr(pt.Pick(r, "1.0.0", "v1.0.0", "1.1.0"))
			if pt.Chance(r, 0.6) {
				spec.Rollout.Candidate = nil
			}
		}
	}
	return spec
}

// TestCandidateProperties checks the candidate rules on random specs:
//
//   - the spec a promotion writes (the candidate's references) and the
//     spec a rollback leaves (Revert) have no active rollout, so neither
//     starts the same rollout again;
//   - CandidateSpec shares no memory with the spec it copies;
//   - Trigger never starts a rollout for a version that is not strictly
//     newer than the one served, the one the spec pins and the one last
//     rolled back, and once its candidate is set it does not start
//     another.
func TestCandidateProperties(t *testing.T) {
	counts := pt.Counts{}
	pt.Run(t, func(r *rand.Rand) error {
		spec := genSpec(r)
		before := spec.DeepCopy()
		cand := CandidateSpec(spec)
		if !equality.Semantic.DeepEqual(before, spec) {
			return fmt.Errorf("CandidateSpec changed the spec: %s", pt.Diff(before, spec))
		}
		for i := range cand.Providers {
			cand.Providers[i].ProviderRef.Name = "mutated"
		}
		if cand.ToolRegistryRef != nil {
			cand.ToolRegistryRef.Name = "mutated"
		}
		if cand.PromptPackRef.Version != nil {
			*cand.PromptPackRef.Version = "9.9.9"
		}
		if !equality.Semantic.DeepEqual(before, spec) {
			return fmt.Errorf("CandidateSpec's copy shares memory with the spec: %s", pt.Diff(before, spec))
		}
		if Active(spec) {
			counts.Add("active")
		}
		promoted := spec.DeepCopy()
		c := CandidateSpec(promoted)
		promoted.PromptPackRef, promoted.Providers, promoted.ToolRegistryRef = c.PromptPackRef, c.Providers, c.ToolRegistryRef
		if Active(promoted) {
			return fmt.Errorf("the promoted spec still has an active rollout: %+v", promoted.Rollout.Candidate)
		}
		reverted := spec.DeepCopy()
		Revert(reverted)
		if Active(reverted) {
			return fmt.Errorf("the reverted spec still has an active rollout: %+v", reverted.Rollout.Candidate)
		}

		a := &omniav1.AgentRuntime{Spec: *spec}
		if pt.Chance(r, 0.8) {
			a.Status.ActiveVersion = pt.Ptr(pt.Pick(r, "1.0.0", "1.1.0", "", "junk"))
		}
		if pt.Chance(r, 0.2) {
			a.Status.Rollout = &omniav1.RolloutStatus{Promoting: pt.Chance(r, 0.5)}
		}
		if pt.Chance(r, 0.3) {
			a.Annotations = map[string]string{omniav1.AnnotationLastRolledBackVersion: pt.Pick(r, "1.1.0", "2.0.0", "junk")}
		}
		latest := pt.Pick(r, "", "1.0.0", "v1.0.0", "1.0.5", "1.1.0", "2.0.0", "2.0.0-rc.1", "junk")
		ref := Trigger(a, latest)
		if ref == nil {
			return nil
		}
		counts.Add("triggered")
		served := ""
		if a.Status.ActiveVersion != nil {
			served = *a.Status.ActiveVersion
		}
		if ref.Version == nil || !newer(*ref.Version, served) {
			return fmt.Errorf("triggers %v over served version %q", ref.Version, served)
		}
		if pin := spec.PromptPackRef.Version; pin != nil && !newer(*ref.Version, *pin) {
			return fmt.Errorf("triggers %s, not newer than the spec's pin %s", *ref.Version, *pin)
		}
		if rb := a.Annotations[omniav1.AnnotationLastRolledBackVersion]; rb != "" && !newer(*ref.Version, rb) {
			return fmt.Errorf("triggers %s again after rolling back %s", *ref.Version, rb)
		}
		a.Spec.Rollout.Candidate = &omniav1.CandidateOverrides{PromptPackRef: ref}
		if again := Trigger(a, latest); again != nil {
			return fmt.Errorf("triggers again (%v) with its own candidate set", *again.Version)
		}
		return nil
	})
	counts.Require(t, 0.02, "active", "triggered")
}

// TestAnalysisParsing checks ParseCondition, Prepare and Judge on random
// conditions, templates and results: no input makes them panic, a parsed
// condition prints back to a string that parses to the same condition,
// and Judge reads a result too short for the condition as an error, never
// as a verdict.
func TestAnalysisParsing(t *testing.T) {
	counts := pt.Counts{}
	pt.Run(t, func(r *rand.Rand) error {
		cond := fmt.Sprintf("%sresult[%d]%s%s%s%s", pt.Pick(r, "", " "), r.IntN(4), pt.Pick(r, "", " "),
			pt.Pick(r, ">=", "<=", ">", "<", "==", "!=", "=>", "="), pt.Pick(r, "", " "), pt.Pick(r, "0.95", "1e3", "-2", "NaN", "Inf", "x", ""))
		c, err := ParseCondition(cond)
		if err != nil {
			counts.Add("condition refused")
		} else {
			counts.Add("condition parsed")
			c2, err := ParseCondition(c.String())
			if err != nil {
				return fmt.Errorf("%q parses to %+v, printed %q, which does not parse: %w", cond, c, c.String(), err)
			}
			if c2 != c && !(c.Value != c.Value && c2.Value != c2.Value) {
				return fmt.Errorf("%q parses to %+v, printed %q, parsed again %+v", cond, c, c.String(), c2)
			}
			result := make([]float64, r.IntN(4))
			for i := range result {
				result[i] = r.Float64()
			}
			o := Judge(c, result, nil)
			if c.Index >= len(result) && o.Err == nil {
				return fmt.Errorf("a %d-value result judged against %s without an error", len(result), c)
			}
		}
		spec := omniav1.RolloutAnalysisSpec{SuccessCondition: cond, Query: pt.Pick(r, "rate(x[5m])", "rate({{args.svc}}[5m])", "{{ args.a }} / {{args.b}}", "{{args.}}")}
		for _, n := range []string{"svc", "a", "b"} {
			if pt.Chance(r, 0.5) {
				spec.Args = append(spec.Args, omniav1.RolloutAnalysisArg{Name: n, Value: pt.MaybePtr(r, 0.5, "v")})
			}
		}
		step := &omniav1.RolloutAnalysisStep{TemplateName: "t"}
		if pt.Chance(r, 0.5) {
			step.Args = []omniav1.AnalysisArg{{Name: pt.Pick(r, "svc", "a", "b", "z"), Value: "w"}}
		}
		if _, _, err := Prepare(spec, step); err == nil {
			counts.Add("query prepared")
		}
		return nil
	})
	counts.Require(t, 0.05, "condition refused", "condition parsed", "query prepared")
}
