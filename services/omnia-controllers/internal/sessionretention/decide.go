// Package sessionretention is the SessionRetentionPolicy controller: it
// resolves the AgentRuntimes each policy selects, settles overlaps (the
// older policy is in force) and reports both in status. ForAgent gives the
// policy in force for one agent, for the component that applies the TTL.
// Decide and ForAgent are pure; Reconciler reads and writes.
package sessionretention

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/agentselect"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Kind names the kind in condition messages.
const Kind = "SessionRetentionPolicy"

// Snapshot is everything one decision reads.
type Snapshot struct {
	// Policy is the policy being reconciled.
	Policy *omniav1.SessionRetentionPolicy
	// All are the policies of the namespace, Policy among them or not.
	All []omniav1.SessionRetentionPolicy
	// Agents are the AgentRuntimes of the namespace.
	Agents []omniav1.AgentRuntime
	// Now stamps condition transitions.
	Now metav1.Time
}

// Decision is what the reconciler writes and emits.
type Decision struct {
	// Status is the complete desired status.
	Status omniav1.AgentPolicyStatus
	// Changed reports whether Status differs from the stored one.
	Changed bool
	// Events are Warning events, one per transition into a spec problem.
	Events []kubeutil.Event
}

// Decide computes a policy's status. A spec problem is a condition, never
// an error: only an edit can fix it, and the policy watch brings that.
func Decide(s Snapshot) Decision {
	p := s.Policy
	st := p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	j := kubeutil.Judgement{Conditions: &st.Conditions, Generation: p.Generation, Now: s.Now}
	self, fault := policyOf(p)
	in := agentselect.Input{Kind: Kind, Self: self, Fault: fault, InForce: inForce(p)}
	for i := range s.All {
		if q := &s.All[i]; q.Name != p.Name {
			peer, _ := policyOf(q)
			in.Peers = append(in.Peers, peer)
		}
	}
	for _, a := range s.Agents {
		in.Agents = append(in.Agents, agentselect.Agent{Name: a.Name, Labels: a.Labels})
	}
	agentselect.Judge(st, &j, in)
	return Decision{Status: *st, Changed: !equality.Semantic.DeepEqual(p.Status, *st), Events: j.Events}
}

// policyOf is p as the selection sees it, with its spec problem: a policy
// with one has no selector and is in force nowhere.
func policyOf(p *omniav1.SessionRetentionPolicy) (agentselect.Policy, *agentselect.Fault) {
	sel, err := agentselect.Selector(p.Spec.AgentSelector)
	if err != nil {
		return agentselect.Policy{Name: p.Name, Created: p.CreationTimestamp},
			&agentselect.Fault{Reason: omniav1.ReasonInvalidSelector, Message: err.Error()}
	}
	return agentselect.Policy{Name: p.Name, Created: p.CreationTimestamp, Selector: sel}, nil
}

// inForce says what a valid policy enforces.
func inForce(p *omniav1.SessionRetentionPolicy) string {
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
	var cands []agentselect.Policy
	var idx []int
	for i := range policies {
		p := &policies[i]
		if p.Namespace != agent.Namespace {
			continue
		}
		if sel, fault := policyOf(p); fault == nil {
			cands = append(cands, sel)
			idx = append(idx, i)
		}
	}
	w := agentselect.Winner(cands, agent.Labels)
	if w < 0 {
		return nil, 0
	}
	p := &policies[idx[w]]
	return p, p.Spec.SessionTTL.Duration
}
