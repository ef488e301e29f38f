package toolpolicy

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	pt "github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

// TestDecideProperties checks Decide on random policies (deny and header
// expressions that compile, do not parse, do not type-check or read
// non-canonical headers) with random stored statuses:
//
//   - no input makes it panic, it leaves its input as it was, and the
//     same input gives the same decision;
//   - Active goes with Compiled and Ready True and every rule counted;
//     Error with both False (CompileError) and fewer rules counted or a
//     header expression that failed; every condition is stamped with the
//     policy's generation;
//   - an event is only emitted with a status write;
//   - its status, stored and decided on again later, needs no write.
func TestDecideProperties(t *testing.T) {
	decision.Run(t, genSnapshot, checkStatus).Require(t, 0.05, "phase Active", "phase Error", "HeaderRefsCanonical True", "HeaderRefsCanonical False", "status write", "no status write")
}

// decision is Decide as the property tests drive it.
var decision = pt.Status[Snapshot, omniav1.ToolPolicyStatus]{Fresh: fresh, Decide: Decide,
	At: func(s *Snapshot) (metav1.Object, *omniav1.ToolPolicyStatus, *metav1.Time) {
		return s.Policy, &s.Policy.Status, &s.Now
	},
	Outcomes: func(st omniav1.ToolPolicyStatus) []string {
		return []string{"phase " + string(st.Phase),
			"HeaderRefsCanonical " + string(meta.FindStatusCondition(st.Conditions, omniav1.ConditionHeaderRefsCanonical).Status)}
	}}

func fresh(s Snapshot) Snapshot {
	s.Policy = s.Policy.DeepCopy()
	return s
}

func checkStatus(s Snapshot, d Decision) error {
	p, st := s.Policy, d.Status
	if st.ObservedGeneration != p.Generation {
		return fmt.Errorf("observedGeneration %d, generation %d", st.ObservedGeneration, p.Generation)
	}
	conds := map[string]*metav1.Condition{}
	for _, typ := range []string{omniav1.ConditionCompiled, omniav1.ConditionReady, omniav1.ConditionHeaderRefsCanonical} {
		c := meta.FindStatusCondition(st.Conditions, typ)
		if c == nil || c.ObservedGeneration != p.Generation {
			return fmt.Errorf("%s = %+v; want it for generation %d", typ, c, p.Generation)
		}
		conds[typ] = c
	}
	compiled, ready := conds[omniav1.ConditionCompiled], conds[omniav1.ConditionReady]
	switch st.Phase {
	case omniav1.ToolPolicyPhaseActive:
		if compiled.Status != metav1.ConditionTrue || ready.Status != metav1.ConditionTrue || int(st.RuleCount) != len(p.Spec.Rules) {
			return fmt.Errorf("Active with Compiled %s, Ready %s, ruleCount %d of %d rules", compiled.Status, ready.Status, st.RuleCount, len(p.Spec.Rules))
		}
	case omniav1.ToolPolicyPhaseError:
		if compiled.Status != metav1.ConditionFalse || ready.Status != metav1.ConditionFalse || ready.Reason != omniav1.ReasonCompileError ||
			int(st.RuleCount) > len(p.Spec.Rules) {
			return fmt.Errorf("Error with Compiled %s, Ready %s/%s, ruleCount %d of %d rules", compiled.Status, ready.Status, ready.Reason, st.RuleCount, len(p.Spec.Rules))
		}
	default:
		return fmt.Errorf("phase %q", st.Phase)
	}
	return nil
}

// denies and values are expressions of every kind the decision judges.
var (
	denies = []string{
		`headers["X-Omnia-Tool-Name"] == "drop_table"`, `body.amount > 1000`, `"X-Omnia-Claim-Team" in headers`, `false`,
		`headers["x-omnia-claim-team"] == "guest"`, `has(headers.authorization)`,
		`body.amount >`, `size(body)`, `user == "bob"`,
	}
	values = []string{`headers["X-Omnia-Claim-Sub"]`, `body.user`, `headers["x-user"]`, `1 + 1`, `"a" +`}
)

func genSnapshot(r *rand.Rand) Snapshot {
	p := &omniav1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pol", Namespace: "ns", Generation: int64(1 + r.IntN(4))},
		Spec: omniav1.ToolPolicySpec{Selector: omniav1.ToolPolicySelector{Registry: "tools"},
			Mode: pt.Pick(r, omniav1.ToolPolicyEnforce, omniav1.ToolPolicyAudit, "")}}
	// Mostly the first five deny expressions, so Active is common.
	valid := pt.Chance(r, 0.5)
	for i := range 1 + r.IntN(4) {
		expr := denies[r.IntN(6)]
		if !valid {
			expr = pt.Pick(r, denies...)
		}
		p.Spec.Rules = append(p.Spec.Rules, rule(fmt.Sprintf("r%d", i), expr))
	}
	for i := range r.IntN(3) {
		h := omniav1.HeaderInjection{Header: fmt.Sprintf("X-H%d", i)}
		switch {
		case pt.Chance(r, 0.3):
			h.Value = pt.Ptr("fixed")
		case valid:
			h.CEL = pt.Ptr(values[r.IntN(3)])
		default:
			h.CEL = pt.Ptr(pt.Pick(r, values...))
		}
		p.Spec.HeaderInjection = append(p.Spec.HeaderInjection, h)
	}
	s := Snapshot{Policy: p, Now: pt.MetaTime(r)}
	decision.Prior(r, &s, func() omniav1.ToolPolicyStatus {
		return omniav1.ToolPolicyStatus{
			Phase:              pt.Pick(r, omniav1.ToolPolicyPhaseActive, omniav1.ToolPolicyPhaseError, ""),
			RuleCount:          int32(r.IntN(5)),
			ObservedGeneration: int64(r.IntN(4)),
			Conditions: pt.Conditions(r, 0.7, omniav1.ConditionCompiled, omniav1.ConditionReady,
				omniav1.ConditionHeaderRefsCanonical, "SomeOtherCondition"),
		}
	})
	return s
}
