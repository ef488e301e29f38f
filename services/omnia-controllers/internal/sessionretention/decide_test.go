package sessionretention

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func policy(name string, age int, sel *metav1.LabelSelector) omniav1.SessionRetentionPolicy {
	return omniav1.SessionRetentionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Generation: 1, CreationTimestamp: metav1.NewTime(t0.Add(-time.Duration(age) * time.Hour))},
		Spec:       omniav1.SessionRetentionPolicySpec{AgentSelector: sel, SessionTTL: metav1.Duration{Duration: time.Duration(age+1) * time.Hour}},
	}
}

func agent(name string, lbl ...string) omniav1.AgentRuntime {
	a := omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{}}}
	for i := 0; i+1 < len(lbl); i += 2 {
		a.Labels[lbl[i]] = lbl[i+1]
	}
	return a
}

func team(v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"team": v}}
}

var badSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}

func TestDecide(t *testing.T) {
	agents := []omniav1.AgentRuntime{agent("billing", "team", "a"), agent("chat", "team", "b"), agent("search", "team", "a")}
	cases := []struct {
		name       string
		self       omniav1.SessionRetentionPolicy
		others     []omniav1.SessionRetentionPolicy
		agents     []omniav1.AgentRuntime
		ready      string
		appliesTo  []string
		count      int32
		conflict   metav1.ConditionStatus
		msgHas     []string
		warnEvents int
	}{
		{name: "an unset selector selects every agent of the namespace", self: policy("all", 1, nil), agents: agents,
			ready: omniav1.ReasonPolicyValid, appliesTo: []string{"billing", "chat", "search"}, count: 3, conflict: metav1.ConditionFalse},
		{name: "an empty selector selects every agent too", self: policy("all", 1, &metav1.LabelSelector{}), agents: agents,
			ready: omniav1.ReasonPolicyValid, appliesTo: []string{"billing", "chat", "search"}, count: 3, conflict: metav1.ConditionFalse},
		{name: "a selector selects the matching agents only", self: policy("a", 1, team("a")), agents: agents,
			ready: omniav1.ReasonPolicyValid, appliesTo: []string{"billing", "search"}, count: 2, conflict: metav1.ConditionFalse},
		{name: "the older of two overlapping policies is in force and says so", self: policy("old", 5, team("a")),
			others: []omniav1.SessionRetentionPolicy{policy("young", 1, nil)}, agents: agents,
			ready: omniav1.ReasonPolicyValid, appliesTo: []string{"billing", "search"}, count: 2, conflict: metav1.ConditionTrue,
			msgHas: []string{"SessionRetentionPolicy young also selects billing, search", "this policy is in force"}},
		{name: "the younger of two overlapping policies loses the shared agents and names the winner", self: policy("young", 1, nil),
			others: []omniav1.SessionRetentionPolicy{policy("old", 5, team("a"))}, agents: agents,
			ready: omniav1.ReasonPolicyValid, appliesTo: []string{"chat"}, count: 1, conflict: metav1.ConditionTrue,
			msgHas: []string{"SessionRetentionPolicy old also selects billing, search", "old is in force (older)"}},
		{name: "between policies of one age the smaller name is in force", self: policy("b", 1, nil),
			others: []omniav1.SessionRetentionPolicy{policy("a", 1, nil)}, agents: agents,
			ready: omniav1.ReasonPolicyValid, count: 0, conflict: metav1.ConditionTrue, msgHas: []string{"a is in force"}},
		{name: "an invalid selector is a condition naming the field, and the policy is in force nowhere", self: policy("bad", 5, badSelector),
			agents: agents, ready: omniav1.ReasonInvalidSelector, count: 0, conflict: metav1.ConditionFalse,
			msgHas: []string{"spec.agentSelector"}, warnEvents: 1},
		{name: "a peer with an invalid selector takes no agent from a younger valid policy", self: policy("young", 1, nil),
			others: []omniav1.SessionRetentionPolicy{policy("bad", 5, badSelector)}, agents: agents,
			ready: omniav1.ReasonPolicyValid, appliesTo: []string{"billing", "chat", "search"}, count: 3, conflict: metav1.ConditionFalse},
		{name: "a policy with no agent to select applies to none", self: policy("all", 1, nil),
			ready: omniav1.ReasonPolicyValid, count: 0, conflict: metav1.ConditionFalse},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			all := append([]omniav1.SessionRetentionPolicy{c.self}, c.others...)
			d := Decide(Snapshot{Policy: &c.self, All: all, Agents: c.agents, Now: metav1.NewTime(t0)})
			ready := meta.FindStatusCondition(d.Status.Conditions, omniav1.ConditionReady)
			conflict := meta.FindStatusCondition(d.Status.Conditions, omniav1.ConditionConflict)
			if ready == nil || ready.Reason != c.ready || (ready.Status == metav1.ConditionTrue) != (c.ready == omniav1.ReasonPolicyValid) {
				t.Errorf("Ready = %+v, want reason %s", ready, c.ready)
			}
			if !slices.Equal(d.Status.AppliesTo, c.appliesTo) || d.Status.AgentCount != c.count {
				t.Errorf("appliesTo %v (%d), want %v (%d)", d.Status.AppliesTo, d.Status.AgentCount, c.appliesTo, c.count)
			}
			if conflict == nil || conflict.Status != c.conflict {
				t.Errorf("Conflict = %+v, want %s", conflict, c.conflict)
			}
			for _, w := range c.msgHas {
				if !strings.Contains(ready.Message+" | "+conflict.Message, w) {
					t.Errorf("messages %q | %q lack %q", ready.Message, conflict.Message, w)
				}
			}
			if len(d.Events) != c.warnEvents {
				t.Errorf("events %v, want %d", d.Events, c.warnEvents)
			}
			if !d.Changed || d.Status.ObservedGeneration != 1 {
				t.Errorf("changed %v observedGeneration %d", d.Changed, d.Status.ObservedGeneration)
			}
		})
	}
}

// TestDecideCapsAppliesTo: a policy over many agents lists the first 64
// names, sorted, and counts them all.
func TestDecideCapsAppliesTo(t *testing.T) {
	var agents []omniav1.AgentRuntime
	for i := range 100 {
		agents = append(agents, agent(fmt.Sprintf("a%03d", 99-i)))
	}
	p := policy("all", 1, nil)
	d := Decide(Snapshot{Policy: &p, All: []omniav1.SessionRetentionPolicy{p}, Agents: agents, Now: metav1.NewTime(t0)})
	if len(d.Status.AppliesTo) != omniav1.MaxListedAgents || d.Status.AgentCount != 100 || d.Status.AppliesTo[0] != "a000" || d.Status.AppliesTo[63] != "a063" {
		t.Fatalf("appliesTo %d names (%s…%s), count %d", len(d.Status.AppliesTo), d.Status.AppliesTo[0], d.Status.AppliesTo[len(d.Status.AppliesTo)-1], d.Status.AgentCount)
	}
}

// TestDecideUnchangedWritesNothing: a second pass over the status the
// first wrote changes nothing, so nothing is written.
func TestDecideUnchangedWritesNothing(t *testing.T) {
	p := policy("all", 1, nil)
	agents := []omniav1.AgentRuntime{agent("x")}
	d := Decide(Snapshot{Policy: &p, All: []omniav1.SessionRetentionPolicy{p}, Agents: agents, Now: metav1.NewTime(t0)})
	p.Status = d.Status
	if d2 := Decide(Snapshot{Policy: &p, All: []omniav1.SessionRetentionPolicy{p}, Agents: agents, Now: metav1.NewTime(t0.Add(time.Hour))}); d2.Changed {
		t.Fatal("second pass changed the status")
	}
}

func TestForAgent(t *testing.T) {
	other := policy("elsewhere", 9, nil)
	other.Namespace = "other"
	cases := []struct {
		name     string
		policies []omniav1.SessionRetentionPolicy
		agent    omniav1.AgentRuntime
		winner   string
		ttl      time.Duration
	}{
		{"the older selecting policy is in force, with its sessionTTL", []omniav1.SessionRetentionPolicy{policy("young", 1, nil), policy("old", 5, nil)},
			agent("x"), "old", 6 * time.Hour},
		{"a policy that does not select the agent is passed over", []omniav1.SessionRetentionPolicy{policy("old", 5, team("b")), policy("young", 1, nil)},
			agent("x", "team", "a"), "young", 2 * time.Hour},
		{"a policy with an invalid selector is passed over", []omniav1.SessionRetentionPolicy{policy("bad", 5, badSelector), policy("young", 1, nil)},
			agent("x"), "young", 2 * time.Hour},
		{"a policy of another namespace is passed over", []omniav1.SessionRetentionPolicy{other}, agent("x"), "", 0},
		{"no policy: none and no TTL", nil, agent("x"), "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, ttl := ForAgent(c.policies, &c.agent)
			name := ""
			if w != nil {
				name = w.Name
			}
			if name != c.winner || ttl != c.ttl {
				t.Fatalf("ForAgent = %q %s, want %q %s", name, ttl, c.winner, c.ttl)
			}
		})
	}
}
