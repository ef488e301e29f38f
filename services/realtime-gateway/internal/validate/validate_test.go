package validate

import (
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/libs/realtime"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
)

func req(ns, name, text string) *realtimev1.PromptRequest {
	return &realtimev1.PromptRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: name}, Text: text}
}

// TestPromptRefusesEachBadFieldByName checks that every kind of bad input
// is InvalidArgument and names the field at fault.
func TestPromptRefusesEachBadFieldByName(t *testing.T) {
	for _, tc := range []struct {
		name  string
		req   *realtimev1.PromptRequest
		field string
	}{
		{"a good request passes", req("team-a", "fix.bug-1", "hello"), ""},
		{"text of exactly the limit passes", req("team-a", "a", strings.Repeat("x", realtime.MaxPromptBytes)), ""},
		{"a missing agent is refused", &realtimev1.PromptRequest{Text: "x"}, "agent"},
		{"an empty namespace is refused", req("", "a", "x"), "agent.namespace"},
		{"an upper-case namespace is refused", req("Team", "a", "x"), "agent.namespace"},
		{"a dotted namespace is refused", req("team.a", "a", "x"), "agent.namespace"},
		{"an empty name is refused", req("ns", "", "x"), "agent.name"},
		{"a name with a slash is refused", req("ns", "a/b", "x"), "agent.name"},
		{"a name over 253 characters is refused", req("ns", strings.Repeat("a", 254), "x"), "agent.name"},
		{"empty text is refused", req("ns", "a", ""), "text"},
		{"text over the limit is refused", req("ns", "a", strings.Repeat("x", realtime.MaxPromptBytes+1)), "text"},
		{"text with a NUL is refused", req("ns", "a", "a\x00b"), "text"},
		{"text that is not UTF-8 is refused", req("ns", "a", "a\xffb"), "text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Prompt(tc.req)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), tc.field+" ") {
				t.Fatalf("Prompt = %v, want InvalidArgument naming %s", err, tc.field)
			}
		})
	}
}

// FuzzValidatePrompt checks that validation never panics, accepts exactly
// the requests the rules allow, and always answers InvalidArgument with a
// valid UTF-8 message when it refuses.
func FuzzValidatePrompt(f *testing.F) {
	f.Add("team-a", "agent-1", "hello")
	f.Add("", "", "")
	f.Add("ns", "a.b", "x\x00")
	f.Add("ns", "a", "\xff")
	f.Add("NS", "-a", "ok")
	f.Fuzz(func(t *testing.T, ns, name, text string) {
		err := Prompt(req(ns, name, text))
		textOK := text != "" && len(text) <= realtime.MaxPromptBytes && utf8.ValidString(text) && !strings.Contains(text, "\x00")
		if err == nil {
			if !textOK || ns == "" || len(ns) > 63 || name == "" || len(name) > 253 || strings.ContainsAny(ns+name, "/ \x00") {
				t.Fatalf("accepted %q/%q text %q", ns, name, text)
			}
			return
		}
		st, ok := status.FromError(err)
		if !ok || st.Code() != codes.InvalidArgument || !utf8.ValidString(st.Message()) {
			t.Fatalf("refusal %v is not a clean InvalidArgument", err)
		}
	})
}
