package toolpolicy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

var t0 = metav1.NewTime(proptest.Epoch)

func rule(name, expr string) omniav1.ToolPolicyRule {
	return omniav1.ToolPolicyRule{Name: name, Deny: omniav1.ToolPolicyDeny{CEL: expr, Message: "refused"}}
}

func policy(gen int64, rules []omniav1.ToolPolicyRule, headers ...omniav1.HeaderInjection) *omniav1.ToolPolicy {
	return &omniav1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pol", Namespace: "ns", Generation: gen},
		Spec: omniav1.ToolPolicySpec{Selector: omniav1.ToolPolicySelector{Registry: "tools"}, Rules: rules, HeaderInjection: headers}}
}

func celHeader(name, expr string) omniav1.HeaderInjection {
	return omniav1.HeaderInjection{Header: name, CEL: &expr}
}

// decided returns p with the status a pass would have written.
func decided(p *omniav1.ToolPolicy) *omniav1.ToolPolicy {
	p.Status = Decide(Snapshot{Policy: p.DeepCopy(), Now: t0}).Status
	return p
}

// TestDecide has one case per rule of the ToolPolicy controller.
func TestDecide(t *testing.T) {
	good := []omniav1.ToolPolicyRule{
		rule("no-prod", `headers["X-Omnia-Tool-Name"] == "delete_db" && body.env == "prod"`),
		rule("team", `!("X-Omnia-Claim-Team" in headers) || headers["X-Omnia-Claim-Team"].lowerAscii() == "guest"`),
	}
	fixed := policy(3, good)
	fixed.Status = decided(policy(2, []omniav1.ToolPolicyRule{rule("r", "((")})).Status
	cases := []struct {
		name     string
		policy   *omniav1.ToolPolicy
		phase    omniav1.ToolPolicyPhase
		reason   string // of Compiled
		msg      string // in Compiled's message
		rules    int32
		canon    string // HeaderRefsCanonical reason
		events   []string
		noChange bool
	}{
		{name: "every expression compiles: Active, Compiled and Ready True, ruleCount counts the rules, a PolicyCompiled event",
			policy: policy(1, good, celHeader("X-Team", `headers["X-Omnia-Claim-Team"]`), omniav1.HeaderInjection{Header: "X-Fixed", Value: new("1")}),
			phase:  omniav1.ToolPolicyPhaseActive, reason: omniav1.ReasonPolicyCompiled, msg: "2 rule(s) and 1 header expression(s) compiled", rules: 2,
			canon: omniav1.ReasonHeaderRefsCanonical, events: []string{omniav1.EventPolicyCompiled}},
		{name: "a deny expression of unknown type (dyn, from the body) compiles: only the call can tell",
			policy: policy(1, []omniav1.ToolPolicyRule{rule("flag", "body.dangerous")}),
			phase:  omniav1.ToolPolicyPhaseActive, reason: omniav1.ReasonPolicyCompiled, rules: 1, canon: omniav1.ReasonHeaderRefsCanonical,
			events: []string{omniav1.EventPolicyCompiled}},
		{name: "a deny expression that does not parse: Error, CompileError naming the rule, a CompileError event",
			policy: policy(1, []omniav1.ToolPolicyRule{rule("ok", "false"), rule("broken", `body.x ==`)}),
			phase:  omniav1.ToolPolicyPhaseError, reason: omniav1.ReasonCompileError, msg: `rule "broken": ERROR: <input>:1:10: Syntax error`, rules: 1,
			canon: omniav1.ReasonHeaderRefsCanonical, events: []string{omniav1.EventCompileError}},
		{name: "a deny expression that is not a bool: CompileError saying what it yields",
			policy: policy(1, []omniav1.ToolPolicyRule{rule("str", `headers["X-Omnia-Tool-Name"]`)}),
			phase:  omniav1.ToolPolicyPhaseError, reason: omniav1.ReasonCompileError, msg: `rule "str": yields string, want bool`,
			canon: omniav1.ReasonHeaderRefsCanonical, events: []string{omniav1.EventCompileError}},
		{name: "a deny expression naming a variable the call does not have: CompileError",
			policy: policy(1, []omniav1.ToolPolicyRule{rule("user", `request.user == "bob"`)}),
			phase:  omniav1.ToolPolicyPhaseError, reason: omniav1.ReasonCompileError, msg: `undeclared reference to 'request'`,
			canon: omniav1.ReasonHeaderRefsCanonical, events: []string{omniav1.EventCompileError}},
		{name: "a header expression that yields no string: CompileError naming the header, and every rule still counts",
			policy: policy(1, good, celHeader("X-Size", "size(body)")),
			phase:  omniav1.ToolPolicyPhaseError, reason: omniav1.ReasonCompileError, msg: `headerInjection "X-Size": yields int, want string`, rules: 2,
			canon: omniav1.ReasonHeaderRefsCanonical, events: []string{omniav1.EventCompileError}},
		{name: "a lookup of a non-canonical header name warns with NonCanonicalHeaderRef, and the policy stays Active",
			policy: policy(1, []omniav1.ToolPolicyRule{rule("team", `headers["x-omnia-claim-team"] == "guest"`)}),
			phase:  omniav1.ToolPolicyPhaseActive, reason: omniav1.ReasonPolicyCompiled, rules: 1,
			canon: omniav1.ReasonNonCanonicalHeaderRef, events: []string{omniav1.EventPolicyCompiled, omniav1.EventNonCanonicalHeaderRef}},
		{name: "a fixed policy is Active again for its new generation, with a PolicyCompiled event",
			policy: fixed, phase: omniav1.ToolPolicyPhaseActive, reason: omniav1.ReasonPolicyCompiled, rules: 2,
			canon: omniav1.ReasonHeaderRefsCanonical, events: []string{omniav1.EventPolicyCompiled}},
		{name: "an unchanged policy needs no write and emits no event",
			policy: decided(policy(1, []omniav1.ToolPolicyRule{rule("team", `headers["x-team"] == "a"`), rule("bad", "1 +")})),
			phase:  omniav1.ToolPolicyPhaseError, reason: omniav1.ReasonCompileError, rules: 1, canon: omniav1.ReasonNonCanonicalHeaderRef, noChange: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Snapshot{Policy: tc.policy, Now: t0})
			st := d.Status
			gen := tc.policy.Generation
			if st.Phase != tc.phase || st.ObservedGeneration != gen || st.RuleCount != tc.rules {
				t.Fatalf("phase %s observedGeneration %d ruleCount %d; want %s, %d, %d", st.Phase, st.ObservedGeneration, st.RuleCount, tc.phase, gen, tc.rules)
			}
			compiled := meta.FindStatusCondition(st.Conditions, omniav1.ConditionCompiled)
			ready := meta.FindStatusCondition(st.Conditions, omniav1.ConditionReady)
			canon := meta.FindStatusCondition(st.Conditions, omniav1.ConditionHeaderRefsCanonical)
			if compiled == nil || compiled.Reason != tc.reason || !strings.Contains(compiled.Message, tc.msg) || compiled.ObservedGeneration != gen {
				t.Fatalf("Compiled = %+v; want %s containing %q at generation %d", compiled, tc.reason, tc.msg, gen)
			}
			wantReady, wantReason := metav1.ConditionTrue, omniav1.ReasonPolicyValidated
			if tc.phase == omniav1.ToolPolicyPhaseError {
				wantReady, wantReason = metav1.ConditionFalse, omniav1.ReasonCompileError
			}
			if ready == nil || ready.Status != wantReady || ready.Reason != wantReason || compiled.Status != wantReady {
				t.Fatalf("Ready = %+v, Compiled %s; want both %s (Ready %s)", ready, compiled.Status, wantReady, wantReason)
			}
			if canon == nil || canon.Reason != tc.canon || (canon.Status == metav1.ConditionTrue) != (tc.canon == omniav1.ReasonHeaderRefsCanonical) {
				t.Fatalf("HeaderRefsCanonical = %+v; want %s", canon, tc.canon)
			}
			var got []string
			for _, e := range d.Events {
				got = append(got, e.Reason)
			}
			if strings.Join(got, ",") != strings.Join(tc.events, ",") {
				t.Fatalf("events %v; want %v", got, tc.events)
			}
			if d.Changed == tc.noChange {
				t.Fatalf("changed = %v; want %v", d.Changed, !tc.noChange)
			}
		})
	}
}

// TestNonCanonicalHeaderRefsMessage: the warning names the expression, the
// key as written and the name to use instead.
func TestNonCanonicalHeaderRefsMessage(t *testing.T) {
	p := policy(1, []omniav1.ToolPolicyRule{rule("team", `headers["x-omnia-claim-team"] == "guest" || headers["x-omnia-claim-team"] == ""`)},
		celHeader("X-User", `"x-user" in headers ? headers["x-user"] : "anonymous"`))
	c := meta.FindStatusCondition(Decide(Snapshot{Policy: p, Now: t0}).Status.Conditions, omniav1.ConditionHeaderRefsCanonical)
	want := `rule "team" reads headers["x-omnia-claim-team"], which is never set: use "X-Omnia-Claim-Team"; ` +
		`headerInjection "X-User" reads headers["x-user"], which is never set: use "X-User"`
	if c == nil || c.Message != want {
		t.Fatalf("HeaderRefsCanonical = %+v\nwant message %s", c, want)
	}
}
