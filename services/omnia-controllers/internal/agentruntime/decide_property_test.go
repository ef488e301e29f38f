package agentruntime

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	pt "github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/rollout"
)

// genSnapshot draws a pass: random agents and inputs (genInputs), now and
// then a rollout, an OIDC issuer, and the objects an earlier pass wrote.
func genSnapshot(r *rand.Rand) snapshot {
	in := genInputs(r)
	a := in.Agent
	if pt.Chance(r, 0.4) {
		version := pt.Pick(r, versionPool...)
		if len(in.Packs) > 0 && pt.Chance(r, 0.7) {
			version = pt.Pick(r, in.Packs...).Spec.Version // one that exists
		}
		a.Spec.Rollout = &omniav1.RolloutConfig{
			Candidate:      &omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Version: pt.Ptr(version)}},
			TrafficRouting: &omniav1.TrafficRoutingConfig{Mode: pt.Pick(r, omniav1.TrafficRoutingReplicaWeighted, omniav1.TrafficRoutingMesh)},
		}
		for range 1 + r.IntN(3) {
			switch r.IntN(3) {
			case 0:
				a.Spec.Rollout.Steps = append(a.Spec.Rollout.Steps, omniav1.RolloutStep{SetWeight: pt.Ptr(int32(pt.Pick(r, 0, 50, 100)))})
			case 1:
				a.Spec.Rollout.Steps = append(a.Spec.Rollout.Steps, omniav1.RolloutStep{Pause: &omniav1.RolloutPause{}})
			default:
				a.Spec.Rollout.Steps = append(a.Spec.Rollout.Steps, omniav1.RolloutStep{Analysis: &omniav1.RolloutAnalysisStep{TemplateName: "errors"}})
			}
		}
		if pt.Chance(r, 0.3) {
			a.Status.Rollout = &omniav1.RolloutStatus{Active: true, CandidateVersion: rollout.CandidateVersion(&a.Spec),
				CurrentStep: pt.Ptr(int32(r.IntN(4))), Promoting: pt.Chance(r, 0.3), PromotedGeneration: pt.MaybePtr(r, 0.5, a.Generation)}
		}
	}
	if pt.Chance(r, 0.3) {
		a.Spec.ExternalAuth = &omniav1.ExternalAuthConfig{OIDC: &omniav1.OIDCAuth{Issuer: pt.Pick(r, "", "https://issuer.example"), Audience: "agents"}}
	}
	a.UID, a.ResourceVersion = "uid-1", "7"
	s := snapshot{in: in, cfg: testConfig, now: pt.MetaTime(r)}
	if rollout.Active(&a.Spec) {
		ca := a.DeepCopy()
		ca.Spec = *rollout.CandidateSpec(&a.Spec)
		cin := in
		cin.Agent = ca
		s.candidate = &candidateInputs{in: cin}
	}
	if pt.Chance(r, 0.4) {
		s = written(s, settleAll(s))
		s.in.Agent.Status = a.Status // the earlier pass's status is not the point here
	}
	return s
}

// settleAll plays the reconciler where every write succeeds and every
// question has a good answer.
func settleAll(s snapshot) plan {
	for range maxRounds {
		p := decide(s)
		switch {
		case len(s.done) < len(p.writes):
			s = succeeded(s, p)
		case p.ask != nil && p.ask.analysis != nil:
			s.analysis = &rollout.AnalysisOutcome{Passed: true}
		case p.ask != nil:
			s.keySet = &keySetAnswer{jwks: []byte(testKeySet)}
		default:
			return p
		}
	}
	panic("did not settle")
}

var apiFailures = []error{
	apierrors.NewServiceUnavailable("busy"),
	apierrors.NewForbidden(schema.GroupResource{Resource: "any"}, "x", errors.New("refused")),
	apierrors.NewConflict(schema.GroupResource{Resource: "any"}, "x", errors.New("stale")),
	apierrors.NewAlreadyExists(schema.GroupResource{Resource: "any"}, "x"),
	apierrors.NewNotFound(schema.GroupResource{Resource: "any"}, "x"),
}

// TestDecideProperties checks decide and the rounds of writes it drives
// on random passes, every write failing now and then with any API error
// and every question answered either way:
//
//   - no input makes it panic, and it leaves the snapshot as it was;
//   - the same snapshot gives the same plan;
//   - each round plans again the writes already made, in the same order,
//     so their recorded outcomes stay theirs;
//   - the pass settles within maxRounds;
//   - every condition of a written status carries the generation the
//     pass read, and a pass that deletes the agent writes no status;
//   - a pass over what a pass wrote, at the same time, writes nothing,
//     unless a rollout or an idle deadline moves on.
func TestDecideProperties(t *testing.T) {
	counts := pt.Counts{}
	pt.Run(t, func(r *rand.Rand) error {
		s := genSnapshot(r)
		var made []string
		for round := range maxRounds + 1 {
			if round == maxRounds {
				return fmt.Errorf("did not settle in %d rounds: %q", maxRounds, made)
			}
			before := s.in.Agent.DeepCopy()
			p := decide(s)
			if !equality.Semantic.DeepEqual(before, s.in.Agent) {
				return fmt.Errorf("decide changed the agent: %s", pt.Diff(before, s.in.Agent))
			}
			names := writesOf(p)
			if again := writesOf(decide(s)); !slices.Equal(names, again) {
				return fmt.Errorf("one snapshot, two plans: %q, %q", names, again)
			}
			if len(names) < len(made) || !slices.Equal(names[:len(made)], made) {
				return fmt.Errorf("writes made %q, planned again as %q", made, names)
			}
			switch {
			case len(s.done) < len(p.writes):
				for _, w := range p.writes[len(s.done):] {
					o := outcome{obj: w.obj}
					if pt.Chance(r, 0.15) {
						o.err = pt.Pick(r, apiFailures...)
					}
					s.done = append(s.done, o)
					made = append(made, fmt.Sprintf("%s %T %s", w.op, w.obj, w.obj.GetName()))
					if o.err != nil {
						counts.Add("a write failed")
						break
					}
				}
				continue
			case p.ask != nil && p.ask.analysis != nil:
				counts.Add("analysis asked")
				s.analysis = pt.Pick(r, &rollout.AnalysisOutcome{Passed: true}, &rollout.AnalysisOutcome{}, &rollout.AnalysisOutcome{Err: errors.New("no data")})
				continue
			case p.ask != nil:
				counts.Add("key set asked")
				s.keySet = pt.Pick(r, &keySetAnswer{jwks: []byte(testKeySet)}, &keySetAnswer{failure: "discovery failed"})
				continue
			}
			return checkSettled(s, p, counts)
		}
		return nil
	})
	counts.Require(t, 0.005, "a write failed", "analysis asked", "key set asked", "status written", "agent deleted", "second pass writes nothing")
}

func checkSettled(s snapshot, p plan, counts pt.Counts) error {
	deletes := slices.ContainsFunc(p.writes, func(w write) bool {
		_, ok := w.obj.(*omniav1.AgentRuntime)
		return ok && w.op == opDelete
	})
	if deletes {
		counts.Add("agent deleted")
		if p.status != nil {
			return fmt.Errorf("a pass that deletes the agent writes a status: %+v", p.status)
		}
		return nil
	}
	if p.status == nil {
		return nil
	}
	counts.Add("status written")
	for _, c := range p.status.Conditions {
		if c.ObservedGeneration != s.in.Agent.Generation && !slices.ContainsFunc(s.in.Agent.Status.Conditions, func(old metav1.Condition) bool {
			return equality.Semantic.DeepEqual(old, c)
		}) {
			return fmt.Errorf("condition %s at generation %d; the pass read %d", c.Type, c.ObservedGeneration, s.in.Agent.Generation)
		}
	}
	// A rollout moves on by itself, and the idle deadline counts from
	// the Ready condition the pass writes: both may write on the next
	// pass by design.
	clean := p.err == nil && !slices.ContainsFunc(s.done, func(o outcome) bool { return o.err != nil })
	if !clean || s.in.Agent.Spec.Rollout != nil || s.in.Agent.Spec.IdleTimeout != nil {
		return nil
	}
	if q := settleAll(written(s, p)); len(q.writes) > 0 {
		return fmt.Errorf("a pass over what a pass wrote writes %q", writesOf(q))
	}
	counts.Add("second pass writes nothing")
	return nil
}
