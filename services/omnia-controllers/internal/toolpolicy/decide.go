// Package toolpolicy is the ToolPolicy controller: it compiles the CEL
// expressions of a policy (each rule's deny condition and each injected
// header's value) against the call's variables (cel.go), and reports the
// result in phase (Active or Error), ruleCount and the Compiled, Ready and
// HeaderRefsCanonical conditions. The ToolRegistry the policy selects
// reports PolicyBound from the Compiled condition. Decide is pure;
// Reconciler reads the policy and writes what Decide returns.
package toolpolicy

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/truncate"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// maxMessage caps a condition message (the API allows 32 KiB) and an
// event's: 64 rules of 4 KiB expressions can fail at once.
const maxMessage = 8 << 10

// Snapshot is everything one decision reads.
type Snapshot struct {
	// Policy is the ToolPolicy being reconciled.
	Policy *omniav1.ToolPolicy
	// Now stamps condition transitions.
	Now metav1.Time
}

// Decision is what the reconciler writes and emits. Its events mark
// transitions: PolicyCompiled, CompileError, NonCanonicalHeaderRef, once
// each, not on every pass. It never retries.
type Decision = kubeutil.Outcome[omniav1.ToolPolicyStatus]

// Decide computes a ToolPolicy's status. A spec problem is never retried:
// the same spec compiles the same way, and an edit is a watch event.
func Decide(s Snapshot) Decision {
	p := s.Policy
	st := p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	j := kubeutil.Judgement{Conditions: &st.Conditions, Generation: p.Generation, Now: s.Now, MaxMessage: maxMessage}

	var errs []string
	n := int32(0)
	for _, r := range p.Spec.Rules {
		if err := CompileDeny(r.Deny.CEL); err != nil {
			errs = append(errs, fmt.Sprintf("rule %q: %v", r.Name, err))
			continue
		}
		n++
	}
	for _, h := range p.Spec.HeaderInjection {
		if h.CEL == nil {
			continue
		}
		if err := CompileHeader(*h.CEL); err != nil {
			errs = append(errs, fmt.Sprintf("headerInjection %q: %v", h.Header, err))
		}
	}
	st.RuleCount = n
	if len(errs) > 0 {
		msg := truncate.String(strings.Join(errs, "; "), maxMessage)
		st.Phase = omniav1.ToolPolicyPhaseError
		changed := j.Set(omniav1.ConditionCompiled, metav1.ConditionFalse, omniav1.ReasonCompileError, msg)
		j.Set(omniav1.ConditionReady, metav1.ConditionFalse, omniav1.ReasonCompileError, "the policy is not enforced: "+msg)
		j.WarnOn(changed, omniav1.EventCompileError, msg)
	} else {
		st.Phase = omniav1.ToolPolicyPhaseActive
		msg := fmt.Sprintf("%d rule(s) and %d header expression(s) compiled", n, headerExprs(p))
		if j.Set(omniav1.ConditionCompiled, metav1.ConditionTrue, omniav1.ReasonPolicyCompiled, msg) {
			j.Events = append(j.Events, kubeutil.Event{Type: corev1.EventTypeNormal, Reason: omniav1.EventPolicyCompiled, Message: msg})
		}
		j.Set(omniav1.ConditionReady, metav1.ConditionTrue, omniav1.ReasonPolicyValidated,
			fmt.Sprintf("policy is active: %s mode, %d rule(s) govern the calls of ToolRegistry %q", mode(p), n, p.Spec.Selector.Registry))
	}
	headerRefs(p, &j)
	return kubeutil.Decided(p.Status, *st, j.Events, nil)
}

// headerRefs judges HeaderRefsCanonical. A lookup of a non-canonical name
// compiles and runs, and silently reads nothing, so it warns without
// failing the policy.
func headerRefs(p *omniav1.ToolPolicy, j *kubeutil.Judgement) {
	var bad []string
	note := func(where, expr string) {
		for _, r := range NonCanonicalHeaderRefs(expr) {
			bad = append(bad, fmt.Sprintf("%s reads headers[%q], which is never set: use %q", where, r.Raw, r.Canonical))
		}
	}
	for _, r := range p.Spec.Rules {
		note(fmt.Sprintf("rule %q", r.Name), r.Deny.CEL)
	}
	for _, h := range p.Spec.HeaderInjection {
		if h.CEL != nil {
			note(fmt.Sprintf("headerInjection %q", h.Header), *h.CEL)
		}
	}
	if len(bad) == 0 {
		j.Set(omniav1.ConditionHeaderRefsCanonical, metav1.ConditionTrue, omniav1.ReasonHeaderRefsCanonical,
			"every header the expressions read by name is in canonical form")
		return
	}
	msg := truncate.String(strings.Join(bad, "; "), maxMessage)
	changed := j.Set(omniav1.ConditionHeaderRefsCanonical, metav1.ConditionFalse, omniav1.ReasonNonCanonicalHeaderRef, msg)
	j.WarnOn(changed, omniav1.EventNonCanonicalHeaderRef, msg)
}

func headerExprs(p *omniav1.ToolPolicy) int {
	n := 0
	for _, h := range p.Spec.HeaderInjection {
		if h.CEL != nil {
			n++
		}
	}
	return n
}

// mode is spec.mode with its default: admission fills it in, but a policy
// stored before the default existed may lack it.
func mode(p *omniav1.ToolPolicy) omniav1.ToolPolicyMode {
	if p.Spec.Mode == "" {
		return omniav1.ToolPolicyEnforce
	}
	return p.Spec.Mode
}
