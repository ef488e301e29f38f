package index

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

func strp(s string) *string { return &s }

// TestAgentIndexesCoverTheCandidate: a rollout candidate's pack, registry
// and Providers are inputs of the agent, so the indexes the watches map
// through list them next to the spec's own.
func TestAgentIndexesCoverTheCandidate(t *testing.T) {
	base := func() *omniav1.AgentRuntime {
		return &omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Spec: omniav1.AgentRuntimeSpec{
			PromptPackRef:   omniav1.PromptPackRef{Name: "support"},
			ToolRegistryRef: &omniav1.ToolRegistryRef{Name: "tools"},
			Providers:       []omniav1.NamedProviderRef{{Name: "default", ProviderRef: omniav1.ProviderRef{Name: "llm"}}},
		}}
	}
	cases := []struct {
		rule                   string
		candidate              *omniav1.CandidateOverrides
		packs, regs, providers []string
	}{
		{"no rollout: the spec's references only", nil,
			[]string{"support"}, []string{"ns/tools"}, []string{"ns/llm"}},
		{"a candidate pack of another pack name is indexed too",
			&omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support-v2"}},
			[]string{"support", "support-v2"}, []string{"ns/tools"}, []string{"ns/llm"}},
		{"a candidate version of the same pack is one entry",
			&omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Version: strp("1.1.0")}},
			[]string{"support"}, []string{"ns/tools"}, []string{"ns/llm"}},
		{"candidate Providers and registry are indexed once each",
			&omniav1.CandidateOverrides{
				ToolRegistryRef: &omniav1.ToolRegistryRef{Name: "tools-v2"},
				ProviderRefs: []omniav1.NamedProviderRef{
					{Name: "default", ProviderRef: omniav1.ProviderRef{Name: "llm-v2"}},
					{Name: "judge", ProviderRef: omniav1.ProviderRef{Name: "llm"}},
				}},
			[]string{"support"}, []string{"ns/tools", "ns/tools-v2"}, []string{"ns/llm", "ns/llm-v2"}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			a := base()
			if tc.candidate != nil {
				a.Spec.Rollout = &omniav1.RolloutConfig{Candidate: tc.candidate, Steps: []omniav1.RolloutStep{{}}}
			}
			if got := agentPackNames(a); !slices.Equal(got, tc.packs) {
				t.Errorf("packs %v, want %v", got, tc.packs)
			}
			if got := agentToolRegistry(a); !slices.Equal(got, tc.regs) {
				t.Errorf("registries %v, want %v", got, tc.regs)
			}
			if got := agentProviders(a); !slices.Equal(got, tc.providers) {
				t.Errorf("providers %v, want %v", got, tc.providers)
			}
			if len(a.Spec.Providers) != 1 {
				t.Errorf("indexing changed the spec's providers: %v", a.Spec.Providers)
			}
		})
	}
}
