// Package sessionretention is the SessionRetentionPolicy controller: it
// resolves the AgentRuntimes each policy selects, settles overlaps (the
// older policy is in force) and reports both in status. ForAgent gives the
// policy in force for one agent, for the component that applies the TTL.
// Decide and ForAgent are pure; Reconciler reads and writes.
package sessionretention

import (
	"fmt"
	"time"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/agentselect"
)

// Snapshot is everything one decision reads.
type Snapshot = agentselect.Snapshot[omniav1.SessionRetentionPolicy]

// Decide computes a policy's status (agentselect.Decide).
func Decide(s Snapshot) agentselect.Decision {
	return agentselect.Decide[omniav1.SessionRetentionPolicy, *omniav1.SessionRetentionPolicy, kind](s)
}

// Judge is p as the selection sees it, with its spec problem: a policy
// with one has no selector and is in force nowhere.
func (kind) Judge(p *omniav1.SessionRetentionPolicy) (agentselect.Policy, *agentselect.Fault) {
	sel, err := agentselect.Selector(p.Spec.AgentSelector)
	if err != nil {
		return agentselect.Policy{Name: p.Name, Created: p.CreationTimestamp},
			&agentselect.Fault{Reason: omniav1.ReasonInvalidSelector, Message: err.Error()}
	}
	return agentselect.Policy{Name: p.Name, Created: p.CreationTimestamp, Selector: sel}, nil
}

// InForce says what a valid policy enforces.
func (kind) InForce(p *omniav1.SessionRetentionPolicy) string {
	msg := "sessions are kept " + p.Spec.SessionTTL.Duration.String() + " after their last activity"
	if t := p.Spec.TranscriptTTL; t != nil {
		msg += fmt.Sprintf(", their transcripts %s", t.Duration)
	}
	return msg
}

// ForAgent returns the policy in force for agent among policies — of those
// in the agent's namespace that select it and have no spec problem, the
// oldest (creationTimestamp, then name) — and its sessionTTL; nil and 0
// when none governs the agent. The AgentRuntime controller can call it
// with the namespace's policies to hand the TTL to the agent's pods.
func ForAgent(policies []omniav1.SessionRetentionPolicy, agent *omniav1.AgentRuntime) (*omniav1.SessionRetentionPolicy, time.Duration) {
	p := agentselect.ForAgent[omniav1.SessionRetentionPolicy, *omniav1.SessionRetentionPolicy, kind](policies, agent)
	if p == nil {
		return nil, 0
	}
	return p, p.Spec.SessionTTL.Duration
}
