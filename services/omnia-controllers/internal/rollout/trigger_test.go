package rollout

import (
	"testing"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

func TestTrigger(t *testing.T) {
	agent := func(mut func(*omniav1.AgentRuntime)) *omniav1.AgentRuntime {
		a := &omniav1.AgentRuntime{Spec: baseSpec()}
		a.Spec.Rollout = &omniav1.RolloutConfig{Steps: []omniav1.RolloutStep{weightStep(50)},
			Trigger: &omniav1.RolloutTrigger{PromptPackChannel: omniav1.ChannelStable}}
		a.Status.ActiveVersion = sp("1.0.0")
		if mut != nil {
			mut(a)
		}
		return a
	}
	cases := []struct {
		name   string
		a      *omniav1.AgentRuntime
		latest string
		want   string
	}{
		{"newer version on the channel starts a rollout", agent(nil), "1.1.0", "1.1.0"},
		{"no trigger does nothing", agent(func(a *omniav1.AgentRuntime) { a.Spec.Rollout.Trigger = nil }), "1.1.0", ""},
		{"no rollout does nothing", agent(func(a *omniav1.AgentRuntime) { a.Spec.Rollout = nil }), "1.1.0", ""},
		{"active rollout is left alone", agent(func(a *omniav1.AgentRuntime) {
			a.Spec.Rollout.Candidate = &omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Version: sp("1.0.5")}}
		}), "1.1.0", ""},
		{"promotion in progress is left alone", agent(func(a *omniav1.AgentRuntime) {
			a.Status.Rollout = &omniav1.RolloutStatus{Active: true, Promoting: true}
		}), "1.1.0", ""},
		{"first deploy is not a rollout", agent(func(a *omniav1.AgentRuntime) { a.Status.ActiveVersion = nil }), "1.1.0", ""},
		{"empty channel does nothing", agent(nil), "", ""},
		{"same version does nothing", agent(nil), "1.0.0", ""},
		{"semver-equal version does nothing", agent(nil), "v1.0.0+b2", ""},
		{"older version does nothing", agent(nil), "0.9.0", ""},
		{"version last rolled back is not tried again", agent(func(a *omniav1.AgentRuntime) {
			a.Annotations = map[string]string{omniav1.AnnotationLastRolledBackVersion: "1.1.0"}
		}), "1.1.0", ""},
		{"version newer than the last rollback starts a rollout", agent(func(a *omniav1.AgentRuntime) {
			a.Annotations = map[string]string{omniav1.AnnotationLastRolledBackVersion: "1.1.0"}
		}), "1.2.0", "1.2.0"},
		{"the version the spec was just edited to pin is not rolled out to itself", agent(func(a *omniav1.AgentRuntime) {
			a.Spec.PromptPackRef.Version = sp("1.1.0")
		}), "1.1.0", ""},
		{"a version older than the spec's pin is not rolled out", agent(func(a *omniav1.AgentRuntime) {
			a.Spec.PromptPackRef.Version = sp("2.0.0")
		}), "1.1.0", ""},
		{"reverted candidate allows a new trigger", agent(func(a *omniav1.AgentRuntime) {
			a.Spec.Rollout.Candidate = &omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Version: sp("1.0.0")}}
		}), "1.1.0", "1.1.0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Trigger(tc.a, tc.latest)
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("Trigger = %+v, want none", got)
			case tc.want != "" && (got == nil || got.Version == nil || *got.Version != tc.want || got.Name != "support"):
				t.Fatalf("Trigger = %+v, want support@%s", got, tc.want)
			}
		})
	}
}
