// Package memorypolicy is the MemoryPolicy controller: it compiles each
// policy's redaction patterns, resolves the AgentRuntimes the policy
// selects, settles overlaps (the older policy is in force) and reports all
// three in status. ForAgent gives the policy in force for one agent, for
// the component that applies it. Decide and ForAgent are pure; Reconciler
// reads and writes.
package memorypolicy

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/agentselect"
)

// Snapshot is everything one decision reads.
type Snapshot = agentselect.Snapshot[omniav1.MemoryPolicy]

// Decide computes a policy's status (agentselect.Decide).
func Decide(s Snapshot) agentselect.Decision {
	return agentselect.Decide[omniav1.MemoryPolicy, *omniav1.MemoryPolicy, kind](s)
}

// Judge is p as the selection sees it, with its spec problem: a policy
// with one has no selector and is in force nowhere, since a redaction it
// cannot apply must not pass for one that is applied.
func (kind) Judge(p *omniav1.MemoryPolicy) (agentselect.Policy, *agentselect.Fault) {
	out := agentselect.Policy{Name: p.Name, Created: p.CreationTimestamp}
	if bad := badPatterns(p.Spec.Redact); len(bad) > 0 {
		return out, &agentselect.Fault{Reason: omniav1.ReasonInvalidRedaction, Message: strings.Join(bad, "; ")}
	}
	sel, err := agentselect.Selector(p.Spec.AgentSelector)
	if err != nil {
		return out, &agentselect.Fault{Reason: omniav1.ReasonInvalidSelector, Message: err.Error()}
	}
	out.Selector = sel
	return out, nil
}

// badPatterns names each redaction pattern that does not compile as RE2,
// with the compiler's words.
func badPatterns(rules []omniav1.RedactionRule) []string {
	var bad []string
	for i, r := range rules {
		if r.Pattern == "" {
			continue
		}
		if _, err := regexp.Compile(r.Pattern); err != nil {
			bad = append(bad, fmt.Sprintf("spec.redact[%d].pattern: %v", i, err))
		}
	}
	return bad
}

// InForce says what a valid policy enforces.
func (kind) InForce(p *omniav1.MemoryPolicy) string {
	parts := []string{"memories kept until deleted"}
	if r := p.Spec.Retention; r != nil {
		parts[0] = "memories kept " + r.TTL.Duration.String()
	}
	if n := p.Spec.MaxEntriesPerUser; n != nil {
		parts = append(parts, fmt.Sprintf("at most %d per user", *n))
	}
	if r := p.Spec.Retrieval; r != nil && r.Strategy != "" {
		parts = append(parts, "retrieval "+string(r.Strategy))
	}
	if n := len(p.Spec.Redact); n > 0 {
		parts = append(parts, fmt.Sprintf("%d redaction rules", n))
	}
	return strings.Join(parts, ", ")
}

// ForAgent returns the policy in force for agent among policies — of those
// in the agent's namespace that select it and have no spec problem, the
// oldest (creationTimestamp, then name) — and its retention TTL (0: kept
// until deleted); nil and 0 when none governs the agent. The AgentRuntime
// controller can call it with the namespace's policies to hand the policy
// to the agent's pods.
func ForAgent(policies []omniav1.MemoryPolicy, agent *omniav1.AgentRuntime) (*omniav1.MemoryPolicy, time.Duration) {
	p := agentselect.ForAgent[omniav1.MemoryPolicy, *omniav1.MemoryPolicy, kind](policies, agent)
	if p == nil || p.Spec.Retention == nil {
		return p, 0
	}
	return p, p.Spec.Retention.TTL.Duration
}
