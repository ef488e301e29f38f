package vendor

import (
	"regexp"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/libs/vendors"
	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

func TestCustomID(t *testing.T) {
	anthropicRule := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	cases := []struct {
		name, uid string
	}{
		{"a UUID uid is kept readable", "0b6f6d2e-6a43-4a4f-9d36-2a5f0e0f5c11"},
		{"characters outside the vendor rule are replaced", "a/b.c d:e"},
		{"a long uid is cut to 64 characters", strings.Repeat("x", 100)},
		{"an empty uid still gives a valid id", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := CustomID(tc.uid)
			if !anthropicRule.MatchString(id) {
				t.Errorf("CustomID(%q) = %q breaks ^[a-zA-Z0-9_-]{1,64}$", tc.uid, id)
			}
			if CustomID(tc.uid) != id {
				t.Errorf("not stable")
			}
		})
	}
}

func TestProviderFor(t *testing.T) {
	cases := []struct {
		name  string
		model string
		want  batchv1.Provider
		ok    bool
	}{
		{"claude models go to Anthropic", "claude-opus-5-5", batchv1.Provider_PROVIDER_ANTHROPIC, true},
		{"gpt models go to OpenAI", "gpt-5", batchv1.Provider_PROVIDER_OPENAI, true},
		{"codex models go to OpenAI", "gpt-5-codex", batchv1.Provider_PROVIDER_OPENAI, true},
		{"gemini models go to Gemini", "gemini-3-pro", batchv1.Provider_PROVIDER_GEMINI, true},
		{"opencode has no batch API", "opencode/x", 0, false},
		{"exec has no batch API", "exec", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ProviderFor(vendors.Route(tc.model).Name())
			if got != tc.want || ok != tc.ok {
				t.Errorf("ProviderFor(%s) = %v %v", tc.model, got, ok)
			}
		})
	}
}
