// Package agentselect is what MemoryPolicy and SessionRetentionPolicy
// share: which AgentRuntimes a policy selects, which policy is in force
// where two select one agent (the older: creationTimestamp, then name), and
// the status that reports both — and the one policy controller both kinds
// run (Reconciler, Decide, ForAgent), generic over the kind: each kind's
// package tells it only what is its own (Kind: its spec problems and what
// a valid policy enforces). The selection and Decide are pure; Reconciler
// reads the policies and agents and writes status.
package agentselect

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// Policy is one policy as the selection sees it.
type Policy struct {
	// Name is the policy's name.
	Name string
	// Created is the policy's creationTimestamp: the older policy wins.
	Created metav1.Time
	// Selector selects its agents; nil when the policy is not in force (its
	// spec has a problem), so it selects none.
	Selector labels.Selector
}

// Selector turns an agentSelector into a labels.Selector: unset or empty
// selects every agent (metav1.LabelSelectorAsSelector would read unset as
// none). The error names the field.
func Selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("spec.agentSelector: %w", err)
	}
	return sel, nil
}

// Wins reports whether a is in force over b where both select an agent:
// the older creationTimestamp, and between equals the smaller name, so the
// answer never depends on the order the cache lists them in.
func Wins(a, b Policy) bool {
	if !a.Created.Equal(&b.Created) {
		return a.Created.Before(&b.Created)
	}
	return a.Name < b.Name
}

// Selects reports whether p selects the agent with these labels.
func (p Policy) Selects(agentLabels map[string]string) bool {
	return p.Selector != nil && p.Selector.Matches(labels.Set(agentLabels))
}

// Winner returns the index in policies of the policy in force for the
// agent with these labels, or -1 when none selects it.
func Winner(policies []Policy, agentLabels map[string]string) int {
	best := -1
	for i, p := range policies {
		if p.Selects(agentLabels) && (best < 0 || Wins(p, policies[best])) {
			best = i
		}
	}
	return best
}

// Agent is one AgentRuntime as the selection sees it.
type Agent struct {
	// Name is the agent's name.
	Name string
	// Labels are the agent's labels.
	Labels map[string]string
}

// Overlap is another policy that selects some of the same agents.
type Overlap struct {
	// Peer is the other policy's name.
	Peer string
	// Agents are the agents both select, sorted.
	Agents []string
	// SelfWins is true when the judged policy is in force for them.
	SelfWins bool
}

// Result is how one policy's selection came out.
type Result struct {
	// AppliesTo are the agents the policy is in force for, sorted.
	AppliesTo []string
	// Overlaps are the peers that select the same agents, by peer name.
	Overlaps []Overlap
}

// Resolve judges self among its peers (other policies of the kind in the
// namespace, self not among them) over the namespace's agents.
func Resolve(self Policy, peers []Policy, agents []Agent) Result {
	var r Result
	shared := map[string]*Overlap{}
	for _, a := range agents {
		if !self.Selects(a.Labels) {
			continue
		}
		wins := true
		for _, p := range peers {
			if !p.Selects(a.Labels) {
				continue
			}
			o := shared[p.Name]
			if o == nil {
				o = &Overlap{Peer: p.Name, SelfWins: Wins(self, p)}
				shared[p.Name] = o
			}
			o.Agents = append(o.Agents, a.Name)
			wins = wins && o.SelfWins
		}
		if wins {
			r.AppliesTo = append(r.AppliesTo, a.Name)
		}
	}
	slices.Sort(r.AppliesTo)
	for _, o := range shared {
		slices.Sort(o.Agents)
		r.Overlaps = append(r.Overlaps, *o)
	}
	slices.SortFunc(r.Overlaps, func(a, b Overlap) int { return strings.Compare(a.Peer, b.Peer) })
	return r
}

// maxNamed caps the agents one overlap's message names.
const maxNamed = 5

// Message says, for the Conflict condition, which peers select the same
// agents and which policy is in force; kind names the policies' kind.
func (r Result) Message(kind string) string {
	parts := make([]string, 0, len(r.Overlaps))
	for _, o := range r.Overlaps {
		winner := o.Peer + " is in force (older)"
		if o.SelfWins {
			winner = "this policy is in force (older)"
		}
		parts = append(parts, fmt.Sprintf("%s %s also selects %s: %s", kind, o.Peer, names(o.Agents), winner))
	}
	return strings.Join(parts, "; ")
}

// names lists agents, the first few by name and the rest as a count.
func names(agents []string) string {
	if len(agents) <= maxNamed {
		return strings.Join(agents, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(agents[:maxNamed], ", "), len(agents)-maxNamed)
}

// Status writes the selection into st: appliesTo (capped at
// omniav1.MaxListedAgents), agentCount and the Conflict condition through
// set (a kubeutil.Judgement's Set).
func (r Result) Status(st *omniav1.AgentPolicyStatus, kind string, set func(typ string, status metav1.ConditionStatus, reason, msg string) bool) {
	st.AgentCount = int32(min(len(r.AppliesTo), 1<<31-1)) //nolint:gosec // clamped to int32's range
	st.AppliesTo = nil
	if len(r.AppliesTo) > 0 {
		st.AppliesTo = slices.Clone(r.AppliesTo[:min(len(r.AppliesTo), omniav1.MaxListedAgents)])
	}
	if len(r.Overlaps) == 0 {
		set(omniav1.ConditionConflict, metav1.ConditionFalse, omniav1.ReasonNoOverlap, "no other "+kind+" selects these agents")
		return
	}
	set(omniav1.ConditionConflict, metav1.ConditionTrue, omniav1.ReasonOverlap, r.Message(kind))
}
