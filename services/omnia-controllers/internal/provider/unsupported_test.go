package provider

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// TestDecideUnsupported: a Provider that sets a field the platform does
// not implement gets Unsupported=True/FieldsNotImplemented naming it by
// path (sorted) and one Warning event; its phase is what it would be
// without the field; nothing set is False/AllFieldsSupported; the next
// pass over the written status writes nothing and repeats no event.
func TestDecideUnsupported(t *testing.T) {
	cases := []struct {
		name       string
		role       omniav1.ProviderRole
		typ        omniav1.ProviderType
		set        func(*omniav1.ProviderSpec)
		wantFields []string
	}{
		{"nothing set → AllFieldsSupported", omniav1.ProviderRoleLLM, omniav1.ProviderTypeMock, func(*omniav1.ProviderSpec) {}, nil},
		{"implemented settings (headers, defaults, pricing) → AllFieldsSupported", omniav1.ProviderRoleLLM, omniav1.ProviderTypeMock, func(s *omniav1.ProviderSpec) {
			s.Headers = map[string]string{"X-A": "b"}
			s.Defaults = &omniav1.ProviderDefaults{MaxTokens: ptr(int32(5))}
			s.Pricing = &omniav1.ProviderPricing{InputCostPer1K: ptr("0.1")}
		}, nil},
		{"spec.tts set → names spec.tts", omniav1.ProviderRoleTTS, omniav1.ProviderTypeCartesia,
			func(s *omniav1.ProviderSpec) { s.TTS = &omniav1.TTSConfig{Voice: "v"} }, []string{"spec.tts"}},
		{"spec.stt set → names spec.stt", omniav1.ProviderRoleSTT, omniav1.ProviderTypeOpenAI,
			func(s *omniav1.ProviderSpec) { s.STT = &omniav1.STTConfig{Language: "en"} }, []string{"spec.stt"}},
		{"spec.embedding set → names spec.embedding", omniav1.ProviderRoleEmbedding, omniav1.ProviderTypeOpenAI,
			func(s *omniav1.ProviderSpec) { s.Embedding = &omniav1.EmbeddingConfig{Distance: "cosine"} }, []string{"spec.embedding"}},
		// Not admitted by the CRD today (one of the three per Provider),
		// but the message must stay sorted and stable whatever is stored.
		{"several set → sorted", omniav1.ProviderRoleTTS, omniav1.ProviderTypeOpenAI, func(s *omniav1.ProviderSpec) {
			s.TTS, s.STT, s.Embedding = &omniav1.TTSConfig{}, &omniav1.STTConfig{}, &omniav1.EmbeddingConfig{}
		}, []string{"spec.embedding", "spec.stt", "spec.tts"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := prov(tc.typ, func(s *omniav1.ProviderSpec) { s.Role = tc.role })
			without := Decide(Snapshot{Provider: p.DeepCopy(), Now: t0})
			tc.set(&p.Spec)
			if got := UnsupportedFields(&p.Spec); !slices.Equal(got, tc.wantFields) {
				t.Fatalf("fields %q, want %q", got, tc.wantFields)
			}
			d := Decide(Snapshot{Provider: p, Now: t0})
			c := meta.FindStatusCondition(d.Status.Conditions, omniav1.ConditionUnsupported)
			var events int
			for _, e := range d.Events {
				if e.Reason == omniav1.EventFieldsNotImplemented {
					events++
				}
			}
			if len(tc.wantFields) == 0 {
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != omniav1.ReasonAllFieldsSupported || events != 0 {
					t.Fatalf("Unsupported %+v, %d events", c, events)
				}
			} else if c == nil || c.Status != metav1.ConditionTrue || c.Reason != omniav1.ReasonFieldsNotImplemented ||
				!strings.HasSuffix(c.Message, ": "+strings.Join(tc.wantFields, ", ")) || events != 1 {
				t.Fatalf("Unsupported %+v, %d events", c, events)
			}
			if d.Status.Phase != without.Status.Phase {
				t.Fatalf("phase %s, %s without the fields", d.Status.Phase, without.Status.Phase)
			}
			p.Status = d.Status
			again := Decide(Snapshot{Provider: p, Now: metav1.NewTime(t0.Add(60e9))})
			if again.Changed || len(again.Events) > 0 {
				t.Fatalf("the next pass writes (%v) or emits %v", again.Changed, again.Events)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
