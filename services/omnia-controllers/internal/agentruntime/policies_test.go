package agentruntime

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// sessionPolicy is a SessionRetentionPolicy of namespace ns, created
// ageHours before t0, selecting agents by sel (nil: all of them).
func sessionPolicy(name string, ageHours int, ttl time.Duration, sel *metav1.LabelSelector) omniav1.SessionRetentionPolicy {
	return omniav1.SessionRetentionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(t0.Add(-time.Duration(ageHours) * time.Hour))},
		Spec:       omniav1.SessionRetentionPolicySpec{AgentSelector: sel, SessionTTL: metav1.Duration{Duration: ttl}},
	}
}

// memoryPolicy is a MemoryPolicy of namespace ns like sessionPolicy, with
// a one-day retention and one redaction rule.
func memoryPolicy(name string, ageHours int, sel *metav1.LabelSelector) omniav1.MemoryPolicy {
	return omniav1.MemoryPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(t0.Add(-time.Duration(ageHours) * time.Hour))},
		Spec: omniav1.MemoryPolicySpec{AgentSelector: sel, Retention: &omniav1.MemoryRetention{TTL: metav1.Duration{Duration: 24 * time.Hour}},
			Redact: []omniav1.RedactionRule{{Category: omniav1.PIIEmail}}},
	}
}

var (
	teamA       = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	teamB       = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
	badSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}}
)

// TestPolicyEnv: the runtime container's environment names the policy of
// each kind in force for the agent and carries its values; a kind with
// none in force sets nothing.
func TestPolicyEnv(t *testing.T) {
	withTranscript := sessionPolicy("short", 1, 2*time.Hour, nil)
	withTranscript.Spec.TranscriptTTL = &metav1.Duration{Duration: 30 * time.Minute}
	badPattern := memoryPolicy("bad-pattern", 9, nil)
	badPattern.Spec.Redact = []omniav1.RedactionRule{{Pattern: "("}}
	otherNS := sessionPolicy("elsewhere", 9, time.Hour, nil)
	otherNS.Namespace = "other"
	const memJSON = `{"retention":{"ttl":"24h0m0s"},"redact":[{"category":"email"}]}`
	cases := []struct {
		name    string
		session []omniav1.SessionRetentionPolicy
		memory  []omniav1.MemoryPolicy
		want    map[string]string
	}{
		{name: "no policy in the namespace: no policy env"},
		{name: "a session policy in force gives its name and TTLs, the transcript TTL defaulting to the session TTL",
			session: []omniav1.SessionRetentionPolicy{sessionPolicy("keep", 1, 720*time.Hour, teamA)},
			want:    map[string]string{EnvSessionRetentionPolicy: "keep", EnvSessionTTL: "720h0m0s", EnvTranscriptTTL: "720h0m0s"}},
		{name: "a set transcriptTTL is passed as is",
			session: []omniav1.SessionRetentionPolicy{withTranscript},
			want:    map[string]string{EnvSessionRetentionPolicy: "short", EnvSessionTTL: "2h0m0s", EnvTranscriptTTL: "30m0s"}},
		{name: "the older of two selecting policies is in force",
			session: []omniav1.SessionRetentionPolicy{sessionPolicy("young", 1, time.Hour, nil), sessionPolicy("old", 5, 3*time.Hour, nil)},
			want:    map[string]string{EnvSessionRetentionPolicy: "old", EnvSessionTTL: "3h0m0s", EnvTranscriptTTL: "3h0m0s"}},
		{name: "a policy that does not select the agent gives nothing",
			session: []omniav1.SessionRetentionPolicy{sessionPolicy("b-only", 1, time.Hour, teamB)},
			memory:  []omniav1.MemoryPolicy{memoryPolicy("b-only", 1, teamB)}},
		{name: "a policy of another namespace gives nothing",
			session: []omniav1.SessionRetentionPolicy{otherNS}},
		{name: "a session policy with a spec problem (not Ready) is in force nowhere, not even over a younger one",
			session: []omniav1.SessionRetentionPolicy{sessionPolicy("bad", 9, time.Hour, badSelector), sessionPolicy("young", 1, 2*time.Hour, nil)},
			want:    map[string]string{EnvSessionRetentionPolicy: "young", EnvSessionTTL: "2h0m0s", EnvTranscriptTTL: "2h0m0s"}},
		{name: "a memory policy whose pattern does not compile (not Ready) gives nothing",
			memory: []omniav1.MemoryPolicy{badPattern}},
		{name: "a memory policy in force gives its name and its spec as JSON without the selector",
			memory: []omniav1.MemoryPolicy{memoryPolicy("mem", 1, teamA)},
			want:   map[string]string{EnvMemoryPolicy: "mem", EnvMemoryPolicyJSON: memJSON}},
		{name: "both kinds reach the runtime side by side",
			session: []omniav1.SessionRetentionPolicy{sessionPolicy("keep", 1, time.Hour, nil)},
			memory:  []omniav1.MemoryPolicy{memoryPolicy("young", 1, nil), memoryPolicy("mem", 2, nil)},
			want: map[string]string{EnvSessionRetentionPolicy: "keep", EnvSessionTTL: "1h0m0s", EnvTranscriptTTL: "1h0m0s",
				EnvMemoryPolicy: "mem", EnvMemoryPolicyJSON: memJSON}},
	}
	policyVars := []string{EnvSessionRetentionPolicy, EnvSessionTTL, EnvTranscriptTTL, EnvMemoryPolicy, EnvMemoryPolicyJSON}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := inputs(agentSpec(func(a *omniav1.AgentRuntime) { a.Labels = map[string]string{"team": "a"} }),
				[]omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)}, readyProvider(nil))
			in.SessionPolicies, in.MemoryPolicies = c.session, c.memory
			tmpl := mustBuild(t, in, Config{RuntimeImage: "runtime:1"}).Spec.Template
			for _, name := range policyVars {
				got, set := envValue(tmpl, name)
				want, wantSet := c.want[name]
				if set != wantSet || got != want {
					t.Errorf("%s = %q (set %v), want %q (set %v)", name, got, set, want, wantSet)
				}
			}
		})
	}
}

// TestPolicyHashFollowsSpecNotStatus: the policy in force is a pod input
// — its spec, or another policy taking over, changes the template and its
// config hash — while its status, an unrelated policy and a policy of
// another namespace change nothing.
func TestPolicyHashFollowsSpecNotStatus(t *testing.T) {
	base := func() Inputs {
		in := inputs(agentSpec(func(a *omniav1.AgentRuntime) { a.Labels = map[string]string{"team": "a"} }),
			[]omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)}, readyProvider(nil))
		in.SessionPolicies = []omniav1.SessionRetentionPolicy{sessionPolicy("keep", 5, time.Hour, teamA)}
		in.MemoryPolicies = []omniav1.MemoryPolicy{memoryPolicy("mem", 5, teamA)}
		return in
	}
	build := func(in Inputs) (template, config string) {
		tmpl := mustBuild(t, in, Config{RuntimeImage: "runtime:1"}).Spec.Template
		return AppliedHash(tmpl), tmpl.Annotations[omniav1.AnnotationConfigHash]
	}
	refTemplate, refConfig := build(base())
	for _, c := range []struct {
		name    string
		mut     func(*Inputs)
		changes bool
	}{
		{"the session policy's status does not roll the pods", func(in *Inputs) {
			in.SessionPolicies[0].Status = omniav1.AgentPolicyStatus{AgentCount: 1, AppliesTo: []string{"agent"}, ObservedGeneration: 4,
				Conditions: []metav1.Condition{{Type: omniav1.ConditionReady, Status: metav1.ConditionTrue}}}
		}, false},
		{"the memory policy's status does not roll the pods", func(in *Inputs) {
			in.MemoryPolicies[0].Status.Conditions = []metav1.Condition{{Type: omniav1.ConditionReady, Status: metav1.ConditionFalse}}
		}, false},
		{"a policy's generation and labels alone do not roll the pods", func(in *Inputs) {
			in.SessionPolicies[0].Generation, in.SessionPolicies[0].Labels = 7, map[string]string{"x": "y"}
		}, false},
		{"a younger policy that loses does not roll the pods", func(in *Inputs) {
			in.SessionPolicies = append(in.SessionPolicies, sessionPolicy("young", 1, 9*time.Hour, nil))
		}, false},
		{"a policy of another namespace does not roll the pods", func(in *Inputs) {
			p := sessionPolicy("older", 9, 9*time.Hour, nil)
			p.Namespace = "other"
			in.SessionPolicies = append(in.SessionPolicies, p)
		}, false},
		{"the sessionTTL rolls the pods", func(in *Inputs) { in.SessionPolicies[0].Spec.SessionTTL.Duration = 2 * time.Hour }, true},
		{"the transcriptTTL rolls the pods", func(in *Inputs) {
			in.SessionPolicies[0].Spec.TranscriptTTL = &metav1.Duration{Duration: time.Minute}
		}, true},
		{"an older policy taking over rolls the pods", func(in *Inputs) {
			in.SessionPolicies = append(in.SessionPolicies, sessionPolicy("older", 9, time.Hour, nil))
		}, true},
		{"the policy deselecting the agent rolls the pods", func(in *Inputs) { in.SessionPolicies[0].Spec.AgentSelector = teamB }, true},
		{"a memory redaction rule rolls the pods", func(in *Inputs) {
			in.MemoryPolicies[0].Spec.Redact = append(in.MemoryPolicies[0].Spec.Redact, omniav1.RedactionRule{Pattern: "x+"})
		}, true},
		{"the memory retention rolls the pods", func(in *Inputs) { in.MemoryPolicies[0].Spec.Retention = nil }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := base()
			c.mut(&in)
			tmpl, cfg := build(in)
			if (tmpl != refTemplate) != c.changes || (cfg != refConfig) != c.changes {
				t.Fatalf("template changed %v, config hash changed %v; want both %v", tmpl != refTemplate, cfg != refConfig, c.changes)
			}
		})
	}
}
