package memorypolicy

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func policy(name string, age int, redact ...string) omniav1.MemoryPolicy {
	p := omniav1.MemoryPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Generation: 2,
		CreationTimestamp: metav1.NewTime(t0.Add(-time.Duration(age) * time.Hour))}}
	for _, r := range redact {
		if r == "email" {
			p.Spec.Redact = append(p.Spec.Redact, omniav1.RedactionRule{Category: omniav1.PIIEmail})
		} else {
			p.Spec.Redact = append(p.Spec.Redact, omniav1.RedactionRule{Pattern: r})
		}
	}
	return p
}

func agents(names ...string) []omniav1.AgentRuntime {
	var out []omniav1.AgentRuntime
	for _, n := range names {
		out = append(out, omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "ns"}})
	}
	return out
}

func TestDecide(t *testing.T) {
	cases := []struct {
		name      string
		self      omniav1.MemoryPolicy
		others    []omniav1.MemoryPolicy
		ready     metav1.ConditionStatus
		reason    string
		msgHas    []string
		appliesTo []string
	}{
		{"valid redaction rules: Ready, in force for the selected agents", policy("p", 1, "email", `ACC-[0-9]{8}`),
			nil, metav1.ConditionTrue, omniav1.ReasonPolicyValid, []string{"2 redaction rules"}, []string{"a", "b"}},
		{"a pattern that does not compile is named by its field, and the policy is in force nowhere", policy("p", 1, "email", `ok`, `(unclosed`),
			nil, metav1.ConditionFalse, omniav1.ReasonInvalidRedaction, []string{"spec.redact[2].pattern", "missing closing )"}, nil},
		{"every bad pattern is named", policy("p", 1, `[z-a]`, `(x`),
			nil, metav1.ConditionFalse, omniav1.ReasonInvalidRedaction, []string{"spec.redact[0].pattern", "spec.redact[1].pattern"}, nil},
		{"an older policy with a bad pattern takes no agent from this one", policy("young", 1),
			[]omniav1.MemoryPolicy{policy("old", 5, `(x`)}, metav1.ConditionTrue, omniav1.ReasonPolicyValid, nil, []string{"a", "b"}},
		{"an older valid policy is in force for the shared agents", policy("young", 1),
			[]omniav1.MemoryPolicy{policy("old", 5)}, metav1.ConditionTrue, omniav1.ReasonPolicyValid, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			all := append([]omniav1.MemoryPolicy{c.self}, c.others...)
			d := Decide(Snapshot{Policy: &c.self, All: all, Agents: agents("a", "b"), Now: metav1.NewTime(t0)})
			r := meta.FindStatusCondition(d.Status.Conditions, omniav1.ConditionReady)
			if r == nil || r.Status != c.ready || r.Reason != c.reason {
				t.Fatalf("Ready = %+v, want %s %s", r, c.ready, c.reason)
			}
			for _, w := range c.msgHas {
				if !strings.Contains(r.Message, w) {
					t.Errorf("message %q lacks %q", r.Message, w)
				}
			}
			if !slices.Equal(d.Status.AppliesTo, c.appliesTo) {
				t.Errorf("appliesTo %v, want %v", d.Status.AppliesTo, c.appliesTo)
			}
		})
	}
}

func TestForAgent(t *testing.T) {
	withTTL := func(p omniav1.MemoryPolicy, d time.Duration) omniav1.MemoryPolicy {
		p.Spec.Retention = &omniav1.MemoryRetention{TTL: metav1.Duration{Duration: d}}
		return p
	}
	a := agents("x")[0]
	cases := []struct {
		name     string
		policies []omniav1.MemoryPolicy
		winner   string
		ttl      time.Duration
	}{
		{"the older policy is in force, with its retention ttl", []omniav1.MemoryPolicy{withTTL(policy("young", 1), time.Hour), withTTL(policy("old", 5), 48*time.Hour)}, "old", 48 * time.Hour},
		{"a policy without retention keeps memories until deleted: ttl 0", []omniav1.MemoryPolicy{policy("p", 1)}, "p", 0},
		{"a policy with a bad pattern is passed over", []omniav1.MemoryPolicy{withTTL(policy("old", 5, `(x`), time.Hour), withTTL(policy("young", 1), 2*time.Hour)}, "young", 2 * time.Hour},
		{"no policy: none", nil, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, ttl := ForAgent(c.policies, &a)
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
