package agentruntime

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// TestUnsupportedFields: each field the platform does not implement is
// named by its path when the spec asks for it, and only then; the list
// is sorted and names a field once however many facades set it.
func TestUnsupportedFields(t *testing.T) {
	schema := &apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}
	echo, runtime := omniav1.HandlerModeEcho, omniav1.HandlerModeRuntime
	facade := func(mut func(*omniav1.FacadeConfig)) func(*omniav1.AgentRuntimeSpec) {
		return func(s *omniav1.AgentRuntimeSpec) {
			f := omniav1.FacadeConfig{Type: omniav1.FacadeTypeWebSocket}
			mut(&f)
			s.Facades = []omniav1.FacadeConfig{f}
		}
	}
	cases := []struct {
		name string
		set  func(*omniav1.AgentRuntimeSpec)
		want []string
	}{
		{"nothing set → none named", func(*omniav1.AgentRuntimeSpec) {}, nil},
		{"spec.inputSchema set → named", func(s *omniav1.AgentRuntimeSpec) { s.InputSchema = schema }, []string{"spec.inputSchema"}},
		{"spec.outputSchema set → named", func(s *omniav1.AgentRuntimeSpec) { s.OutputSchema = schema }, []string{"spec.outputSchema"}},
		{"spec.outputFormat set → named", func(s *omniav1.AgentRuntimeSpec) { s.OutputFormat = "json" }, []string{"spec.outputFormat"}},
		{"spec.facades[].handler echo → named", facade(func(f *omniav1.FacadeConfig) { f.Handler = &echo }), []string{"spec.facades[].handler"}},
		{"spec.facades[].handler runtime (the default, what the pod does) → none", facade(func(f *omniav1.FacadeConfig) { f.Handler = &runtime }), nil},
		{"spec.facades[].clientToolTimeout set → named", facade(func(f *omniav1.FacadeConfig) { f.ClientToolTimeout = &metav1.Duration{Duration: time.Minute} }),
			[]string{"spec.facades[].clientToolTimeout"}},
		{"spec.facades[].extraEnv set → named", facade(func(f *omniav1.FacadeConfig) { f.ExtraEnv = []corev1.EnvVar{{Name: "A", Value: "b"}} }),
			[]string{"spec.facades[].extraEnv"}},
		{"spec.facades[].managementPlane set → named", facade(func(f *omniav1.FacadeConfig) { f.ManagementPlane = ptr(true) }),
			[]string{"spec.facades[].managementPlane"}},
		{"spec.facades[].expose enabled → named", facade(func(f *omniav1.FacadeConfig) { f.Expose = &omniav1.FacadeExpose{Enabled: true} }),
			[]string{"spec.facades[].expose"}},
		{"spec.facades[].expose disabled → none", facade(func(f *omniav1.FacadeConfig) { f.Expose = &omniav1.FacadeExpose{Host: "a.example"} }), nil},
		{"spec.media set → named", func(s *omniav1.AgentRuntimeSpec) { s.Media = &omniav1.MediaConfig{BasePath: "/m"} }, []string{"spec.media"}},
		{"spec.evals enabled → named", func(s *omniav1.AgentRuntimeSpec) { s.Evals = &omniav1.EvalConfig{Enabled: true} }, []string{"spec.evals"}},
		{"spec.evals disabled → none", func(s *omniav1.AgentRuntimeSpec) { s.Evals = &omniav1.EvalConfig{} }, nil},
		{"spec.console set → named", func(s *omniav1.AgentRuntimeSpec) { s.Console = &omniav1.ConsoleConfig{} }, []string{"spec.console"}},
		{"spec.duplex enabled → named", func(s *omniav1.AgentRuntimeSpec) { s.Duplex = &omniav1.DuplexConfig{Enabled: true} }, []string{"spec.duplex"}},
		{"spec.duplex disabled → none", func(s *omniav1.AgentRuntimeSpec) { s.Duplex = &omniav1.DuplexConfig{Mode: "audio"} }, nil},
		{"spec.memory enabled → named", func(s *omniav1.AgentRuntimeSpec) { s.Memory = &omniav1.MemoryConfig{Enabled: true} }, []string{"spec.memory"}},
		{"spec.memory disabled → none", func(s *omniav1.AgentRuntimeSpec) { s.Memory = &omniav1.MemoryConfig{} }, nil},
		{"spec.externalAuth.clientKeys set → named", func(s *omniav1.AgentRuntimeSpec) {
			s.ExternalAuth = &omniav1.ExternalAuthConfig{ClientKeys: &omniav1.ClientKeysAuth{}}
		}, []string{"spec.externalAuth.clientKeys"}},
		{"spec.externalAuth.edgeTrust set → named", func(s *omniav1.AgentRuntimeSpec) {
			s.ExternalAuth = &omniav1.ExternalAuthConfig{EdgeTrust: &omniav1.EdgeTrustAuth{}}
		}, []string{"spec.externalAuth.edgeTrust"}},
		{"spec.externalAuth.oidc (mirrored) → none", func(s *omniav1.AgentRuntimeSpec) {
			s.ExternalAuth = &omniav1.ExternalAuthConfig{OIDC: &omniav1.OIDCAuth{Issuer: "https://i", Audience: "a"}}
		}, nil},
		{"spec.privacyPolicyRef set → named", func(s *omniav1.AgentRuntimeSpec) { s.PrivacyPolicyRef = &omniav1.LocalObjectReference{Name: "p"} },
			[]string{"spec.privacyPolicyRef"}},
		{"spec.context (implemented) → none", func(s *omniav1.AgentRuntimeSpec) {
			s.Context = &omniav1.ContextConfig{Type: omniav1.StoreTypeRedis, StoreRef: &omniav1.LocalObjectReference{Name: "r"}}
		}, nil},
		{"several set → sorted by path, each named once", func(s *omniav1.AgentRuntimeSpec) {
			s.Memory = &omniav1.MemoryConfig{Enabled: true}
			s.Evals = &omniav1.EvalConfig{Enabled: true}
			s.Media = &omniav1.MediaConfig{}
			env := []corev1.EnvVar{{Name: "A"}}
			s.Facades = []omniav1.FacadeConfig{{Type: omniav1.FacadeTypeWebSocket, ExtraEnv: env}, {Type: omniav1.FacadeTypeA2A, ExtraEnv: env}}
		}, []string{"spec.evals", "spec.facades[].extraEnv", "spec.media", "spec.memory"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := agentSpec(nil)
			tc.set(&a.Spec)
			if got := UnsupportedFields(&a.Spec); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDecideUnsupported: the Unsupported condition is set on every pass,
// from the spec alone; it leaves the phase and the writes as they are, a
// Warning event marks each change to a non-empty list and none repeats it,
// and a status that already holds it is not written again.
func TestDecideUnsupported(t *testing.T) {
	evals := func(a *omniav1.AgentRuntime) { a.Spec.Evals = &omniav1.EvalConfig{Enabled: true} }
	evalsAndMedia := func(a *omniav1.AgentRuntime) { evals(a); a.Spec.Media = &omniav1.MediaConfig{} }
	missingPack := func(a *omniav1.AgentRuntime) { a.Spec.PromptPackRef.Version = ptr("9.9.9") }
	cases := []struct {
		name       string
		stored     func(*omniav1.AgentRuntime) // the spec the stored status was decided on; nil: none stored
		spec       func(*omniav1.AgentRuntime)
		wantStatus metav1.ConditionStatus
		wantReason string
		wantMsg    string // a substring
		wantEvent  bool
		blocked    bool // the inputs are not usable
	}{
		{"nothing unsupported set → False/AllFieldsSupported, no event", nil, nil,
			metav1.ConditionFalse, omniav1.ReasonAllFieldsSupported, "every field", false, false},
		{"spec.evals set → True/FieldsNotImplemented naming spec.evals, one Warning event", nil, evals,
			metav1.ConditionTrue, omniav1.ReasonFieldsNotImplemented, ": spec.evals", true, false},
		{"the list grows → the message names both, sorted, and a new event", evals, evalsAndMedia,
			metav1.ConditionTrue, omniav1.ReasonFieldsNotImplemented, ": spec.evals, spec.media", true, false},
		{"the field removed → False/AllFieldsSupported, no event", evals, nil,
			metav1.ConditionFalse, omniav1.ReasonAllFieldsSupported, "every field", false, false},
		{"inputs not usable (a pinned version that does not exist) → the condition is set all the same", nil, func(a *omniav1.AgentRuntime) { evals(a); missingPack(a) },
			metav1.ConditionTrue, omniav1.ReasonFieldsNotImplemented, ": spec.evals", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := readySnapshot(tc.spec)
			if tc.stored != nil {
				prev := readySnapshot(tc.stored)
				s.in.Agent.Status = *settle(t, prev).status
			}
			p := settle(t, s)
			c := meta.FindStatusCondition(p.status.Conditions, omniav1.ConditionUnsupported)
			if c == nil || c.Status != tc.wantStatus || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantMsg) {
				t.Fatalf("Unsupported = %+v, want %s/%s with %q", c, tc.wantStatus, tc.wantReason, tc.wantMsg)
			}
			if got := unsupportedEvents(p); (len(got) == 1) != tc.wantEvent || len(got) > 1 {
				t.Fatalf("events %+v, want one: %v", got, tc.wantEvent)
			}
			// The same spec without the unsupported fields: the same phase
			// and the same writes.
			base := readySnapshot(nil)
			if tc.blocked {
				base = readySnapshot(missingPack)
			}
			pb := settle(t, base)
			if pb.status.Phase != p.status.Phase || !slices.Equal(writesOf(pb), writesOf(p)) {
				t.Fatalf("phase %s, writes %q; without the fields %s, %q", p.status.Phase, writesOf(p), pb.status.Phase, writesOf(pb))
			}
			// The next pass over the stored status finds nothing to write
			// and emits no event again.
			again := decide(written(s, p))
			stored := written(s, p).in.Agent.Status
			if again.status != nil && !equality.Semantic.DeepEqual(stored.Conditions, again.status.Conditions) {
				t.Fatalf("the stored conditions need another write:\n%+v\n%+v", stored.Conditions, again.status.Conditions)
			}
			if ev := unsupportedEvents(again); len(ev) > 0 {
				t.Fatalf("the next pass repeats the event: %+v", ev)
			}
		})
	}
}

// settle decides a snapshot until its plan has no write left to make,
// each write succeeding, and returns the last plan.
func settle(t *testing.T, s snapshot) plan {
	t.Helper()
	for range 10 {
		p := decide(s)
		if len(p.writes) == len(s.done) {
			if p.status == nil {
				t.Fatal("the pass writes no status")
			}
			return p
		}
		s.done = append(s.done, outcome{obj: p.writes[len(s.done)].obj})
	}
	t.Fatal("the plan does not settle")
	return plan{}
}

func unsupportedEvents(p plan) []note {
	var out []note
	for _, e := range p.events {
		if e.Reason == omniav1.EventFieldsNotImplemented {
			out = append(out, e)
		}
	}
	return out
}
