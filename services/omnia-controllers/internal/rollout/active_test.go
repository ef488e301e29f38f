package rollout

import (
	"testing"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

func sp[T any](v T) *T { return &v }

func baseSpec() omniav1.AgentRuntimeSpec {
	return omniav1.AgentRuntimeSpec{
		PromptPackRef:   omniav1.PromptPackRef{Name: "support", Version: sp("1.0.0")},
		Providers:       []omniav1.NamedProviderRef{{Name: "default", ProviderRef: omniav1.ProviderRef{Name: "llm"}}},
		ToolRegistryRef: &omniav1.ToolRegistryRef{Name: "tools"},
	}
}

func withCandidate(c *omniav1.CandidateOverrides) *omniav1.AgentRuntimeSpec {
	s := baseSpec()
	s.Rollout = &omniav1.RolloutConfig{Candidate: c, Steps: []omniav1.RolloutStep{{SetWeight: sp(int32(50))}}}
	return &s
}

func TestActive(t *testing.T) {
	stable := omniav1.ChannelStable
	pre := omniav1.ChannelPrerelease
	cases := []struct {
		name string
		spec *omniav1.AgentRuntimeSpec
		want bool
	}{
		{"no rollout is idle", func() *omniav1.AgentRuntimeSpec { s := baseSpec(); return &s }(), false},
		{"no candidate is idle", withCandidate(nil), false},
		{"empty candidate is idle", withCandidate(&omniav1.CandidateOverrides{}), false},
		{"other pack name is active", withCandidate(&omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "sales", Version: sp("1.0.0")}}), true},
		{"other version is active", withCandidate(&omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Version: sp("1.1.0")}}), true},
		{"semver-equal version is idle", withCandidate(&omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Version: sp("v1.0.0")}}), false},
		{"build metadata only is idle", withCandidate(&omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Version: sp("1.0.0+b7")}}), false},
		{"track instead of version is active", withCandidate(&omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Track: &pre}}), true},
		{"unset track equals stable track", func() *omniav1.AgentRuntimeSpec {
			s := withCandidate(&omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Track: &stable}})
			s.PromptPackRef = omniav1.PromptPackRef{Name: "support"}
			return s
		}(), false},
		{"other provider is active", withCandidate(&omniav1.CandidateOverrides{ProviderRefs: []omniav1.NamedProviderRef{{Name: "default", ProviderRef: omniav1.ProviderRef{Name: "llm-2"}}}}), true},
		{"same providers are idle", withCandidate(&omniav1.CandidateOverrides{ProviderRefs: []omniav1.NamedProviderRef{{Name: "default", ProviderRef: omniav1.ProviderRef{Name: "llm"}}}}), false},
		{"extra provider is active", withCandidate(&omniav1.CandidateOverrides{ProviderRefs: []omniav1.NamedProviderRef{
			{Name: "default", ProviderRef: omniav1.ProviderRef{Name: "llm"}}, {Name: "judge", ProviderRef: omniav1.ProviderRef{Name: "llm"}}}}), true},
		{"other registry is active", withCandidate(&omniav1.CandidateOverrides{ToolRegistryRef: &omniav1.ToolRegistryRef{Name: "tools-2"}}), true},
		{"same registry is idle", withCandidate(&omniav1.CandidateOverrides{ToolRegistryRef: &omniav1.ToolRegistryRef{Name: "tools"}}), false},
		{"registry where spec has none is active", func() *omniav1.AgentRuntimeSpec {
			s := withCandidate(&omniav1.CandidateOverrides{ToolRegistryRef: &omniav1.ToolRegistryRef{Name: "tools"}})
			s.ToolRegistryRef = nil
			return s
		}(), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Active(tc.spec); got != tc.want {
				t.Fatalf("Active = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCandidateSpecAndRevert(t *testing.T) {
	t.Run("candidate spec applies every override and shares no slice", func(t *testing.T) {
		s := withCandidate(&omniav1.CandidateOverrides{
			PromptPackRef:   &omniav1.PromptPackRef{Name: "support", Version: sp("2.0.0")},
			ProviderRefs:    []omniav1.NamedProviderRef{{Name: "default", ProviderRef: omniav1.ProviderRef{Name: "llm-2"}}},
			ToolRegistryRef: &omniav1.ToolRegistryRef{Name: "tools-2"},
		})
		c := CandidateSpec(s)
		if *c.PromptPackRef.Version != "2.0.0" || c.Providers[0].ProviderRef.Name != "llm-2" || c.ToolRegistryRef.Name != "tools-2" {
			t.Fatalf("candidate spec %+v", c)
		}
		if *s.PromptPackRef.Version != "1.0.0" || s.Providers[0].ProviderRef.Name != "llm" {
			t.Fatal("the original spec changed")
		}
		if Active(c) {
			t.Fatal("a promoted spec must leave the rollout idle")
		}
		c.Providers[0].Name = "changed"
		if c.Rollout.Candidate.ProviderRefs[0].Name == "changed" {
			t.Fatal("providers alias the candidate's list")
		}
	})
	t.Run("unset overrides keep the spec", func(t *testing.T) {
		s := withCandidate(&omniav1.CandidateOverrides{ToolRegistryRef: &omniav1.ToolRegistryRef{Name: "tools-2"}})
		c := CandidateSpec(s)
		if *c.PromptPackRef.Version != "1.0.0" || c.Providers[0].ProviderRef.Name != "llm" {
			t.Fatalf("candidate spec %+v", c)
		}
	})
	t.Run("revert makes the rollout idle", func(t *testing.T) {
		s := withCandidate(&omniav1.CandidateOverrides{
			PromptPackRef:   &omniav1.PromptPackRef{Name: "support", Version: sp("2.0.0")},
			ProviderRefs:    []omniav1.NamedProviderRef{{Name: "default", ProviderRef: omniav1.ProviderRef{Name: "llm-2"}}},
			ToolRegistryRef: &omniav1.ToolRegistryRef{Name: "tools-2"},
		})
		Revert(s)
		if Active(s) {
			t.Fatalf("still active after revert: %+v", s.Rollout.Candidate)
		}
	})
	t.Run("revert of a registry the spec lacks clears it", func(t *testing.T) {
		s := withCandidate(&omniav1.CandidateOverrides{ToolRegistryRef: &omniav1.ToolRegistryRef{Name: "tools"}})
		s.ToolRegistryRef = nil
		Revert(s)
		if Active(s) || s.Rollout.Candidate.ToolRegistryRef != nil {
			t.Fatalf("candidate %+v", s.Rollout.Candidate)
		}
	})
}

func TestCandidateVersion(t *testing.T) {
	pre := omniav1.ChannelPrerelease
	cases := []struct {
		name string
		spec *omniav1.AgentRuntimeSpec
		want string
	}{
		{"pinned version names the candidate", withCandidate(&omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Version: sp("2.0.0")}}), "2.0.0"},
		{"track names a candidate without version", withCandidate(&omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Track: &pre}}), "prerelease"},
		{"pack name names a candidate without version or track", withCandidate(&omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "sales"}}), "sales"},
		{"no pack override uses the stable ref", withCandidate(&omniav1.CandidateOverrides{ToolRegistryRef: &omniav1.ToolRegistryRef{Name: "x"}}), "1.0.0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := CandidateVersion(tc.spec); got != tc.want {
				t.Fatalf("CandidateVersion = %q, want %q", got, tc.want)
			}
		})
	}
}
