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
		name, ns, uid string
	}{
		{"a UUID uid is kept whole and readable", "team-a", "0b6f6d2e-6a43-4a4f-9d36-2a5f0e0f5c11"},
		{"characters outside the vendor rule are replaced", "team-a", "a/b.c d:e"},
		{"a long uid is cut to 64 characters", strings.Repeat("n", 63), strings.Repeat("x", 100)},
		{"an empty uid still gives a valid id", "team-a", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, id := range []string{CustomID(tc.ns, tc.uid), LegacyCustomID(tc.uid)} {
				if !anthropicRule.MatchString(id) {
					t.Errorf("id %q breaks ^[a-zA-Z0-9_-]{1,64}$", id)
				}
			}
			// Stable: the id of a run is the same however often it is
			// computed (a copy of the inputs rules out aliasing).
			ns, uid := strings.Clone(tc.ns), strings.Clone(tc.uid)
			if first, again := CustomID(tc.ns, tc.uid), CustomID(ns, uid); first != again {
				t.Errorf("not stable: %q then %q", first, again)
			}
		})
	}
	t.Run("the same uid in another namespace is another id", func(t *testing.T) {
		if CustomID("team-a", "u") == CustomID("team-b", "u") {
			t.Error("the namespace does not change the id")
		}
	})
	t.Run("a UUID uid is whole in the id", func(t *testing.T) {
		uid := "0b6f6d2e-6a43-4a4f-9d36-2a5f0e0f5c11"
		if id := CustomID(strings.Repeat("n", 63), uid); !strings.HasSuffix(id, uid) {
			t.Errorf("id %q cuts the uid", id)
		}
	})
	t.Run("a ref matches its id and its legacy id, nothing else", func(t *testing.T) {
		r := Ref{CustomID: CustomID("team-a", "u"), LegacyCustomID: LegacyCustomID("u")}
		if !r.Matches(CustomID("team-a", "u")) || !r.Matches(LegacyCustomID("u")) || r.Matches(CustomID("team-b", "u")) ||
			r.Matches(CustomID("team-a", "v")) || r.Matches("") {
			t.Error("Matches is wrong")
		}
	})
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
