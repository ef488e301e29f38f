package agentruntime

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

var t0 = metav1.NewTime(proptest.Epoch)

func agentSpec(mut func(*omniav1.AgentRuntime)) *omniav1.AgentRuntime {
	a := &omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns", Generation: 3},
		Spec: omniav1.AgentRuntimeSpec{
			PromptPackRef: omniav1.PromptPackRef{Name: "support"},
			Facades:       []omniav1.FacadeConfig{{Type: omniav1.FacadeTypeWebSocket}},
			Providers: []omniav1.NamedProviderRef{{Name: "default", ProviderRef: omniav1.ProviderRef{Name: "llm"},
				RequiredCapabilities: []omniav1.ProviderCapability{omniav1.CapabilityTools}}},
		}}
	if mut != nil {
		mut(a)
	}
	return a
}

func ppack(name, version string, phase omniav1.PromptPackPhase) omniav1.PromptPack {
	return omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: omniav1.PromptPackSpec{PackName: "support", Version: version, Source: omniav1.PromptPackSource{
			Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: name}}},
		Status: omniav1.PromptPackStatus{Phase: phase, ContentDigest: "sha256:" + name}}
}

func livePack() omniav1.PromptPack {
	p := ppack("live", "0.1.0", omniav1.PromptPackPhaseActive)
	p.Spec.Source = omniav1.PromptPackSource{Type: omniav1.SourceTypeLive, Live: &omniav1.LivePromptSource{URL: "http://authoring/pack.json"}}
	return p
}

func readyProvider(mut func(*omniav1.Provider)) *omniav1.Provider {
	p := &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: "ns"},
		Spec:   omniav1.ProviderSpec{Type: omniav1.ProviderTypeMock, Capabilities: []omniav1.ProviderCapability{omniav1.CapabilityText, omniav1.CapabilityTools}},
		Status: omniav1.ProviderStatus{Phase: omniav1.ProviderPhaseReady}}
	if mut != nil {
		mut(p)
	}
	return p
}

func inputs(a *omniav1.AgentRuntime, packs []omniav1.PromptPack, prov *omniav1.Provider) Inputs {
	in := Inputs{Agent: a, Packs: packs, Providers: map[string]*omniav1.Provider{"ns/llm": prov}, Secrets: map[string]*corev1.Secret{}}
	return in
}

// TestResolve has a case per branch of the resolution of an agent's
// references and per side of the error-handling split (Retry set =
// requeue with backoff; nil = wait for a watch event).
func TestResolve(t *testing.T) {
	v := func(s string) *string { return &s }
	stable := omniav1.ChannelStable
	ok := []omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseSuperseded), ppack("v2", "2.0.0", omniav1.PromptPackPhaseActive), ppack("v3", "3.0.0", omniav1.PromptPackPhaseFailed)}
	other := "other"
	cases := []struct {
		name   string
		in     Inputs
		usable bool
		phase  omniav1.AgentRuntimePhase
		retry  bool
		cond   [3]string // type, status, reason
		pack   string
	}{
		{"no PromptPack matches: Failed, retried", inputs(agentSpec(nil), nil, readyProvider(nil)),
			false, omniav1.AgentRuntimePhaseFailed, true, [3]string{omniav1.ConditionPromptPackReady, "False", omniav1.ReasonPromptPackNotFound}, ""},
		{"version and track both set: invalid ref, not retried", inputs(agentSpec(func(a *omniav1.AgentRuntime) {
			a.Spec.PromptPackRef.Version, a.Spec.PromptPackRef.Track = v("1.0.0"), &stable
		}), ok, readyProvider(nil)), false, omniav1.AgentRuntimePhaseFailed, false, [3]string{omniav1.ConditionPromptPackReady, "False", omniav1.ReasonPromptPackRefInvalid}, ""},
		{"pinned version absent: Failed, retried", inputs(agentSpec(func(a *omniav1.AgentRuntime) { a.Spec.PromptPackRef.Version = v("9.0.0") }), ok, readyProvider(nil)),
			false, omniav1.AgentRuntimePhaseFailed, true, [3]string{omniav1.ConditionPromptPackReady, "False", omniav1.ReasonPromptPackNotFound}, ""},
		{"pinned version failed validation: Failed, not retried", inputs(agentSpec(func(a *omniav1.AgentRuntime) { a.Spec.PromptPackRef.Version = v("v3.0.0") }), ok, readyProvider(nil)),
			false, omniav1.AgentRuntimePhaseFailed, false, [3]string{omniav1.ConditionPromptPackReady, "False", omniav1.ReasonPromptPackInvalid}, ""},
		{"every version failed: Failed, not retried", inputs(agentSpec(nil), []omniav1.PromptPack{ppack("v3", "3.0.0", omniav1.PromptPackPhaseFailed)}, readyProvider(nil)),
			false, omniav1.AgentRuntimePhaseFailed, false, [3]string{omniav1.ConditionPromptPackReady, "False", omniav1.ReasonPromptPackInvalid}, ""},
		{"only an unvalidated version: Failed, retried", inputs(agentSpec(nil), []omniav1.PromptPack{ppack("v1", "1.0.0", "")}, readyProvider(nil)),
			false, omniav1.AgentRuntimePhaseFailed, true, [3]string{omniav1.ConditionPromptPackReady, "False", omniav1.ReasonPromptPackNotFound}, ""},
		{"live pack in a rollout: Failed, not retried", inputs(agentSpec(func(a *omniav1.AgentRuntime) { a.Spec.Rollout = &omniav1.RolloutConfig{} }), []omniav1.PromptPack{livePack()}, readyProvider(nil)),
			false, omniav1.AgentRuntimePhaseFailed, false, [3]string{omniav1.ConditionPromptPackReady, "False", omniav1.ReasonPromptPackRefInvalid}, ""},
		{"live and published versions mixed: Failed, not retried", inputs(agentSpec(nil), append([]omniav1.PromptPack{livePack()}, ok...), readyProvider(nil)),
			false, omniav1.AgentRuntimePhaseFailed, false, [3]string{omniav1.ConditionPromptPackReady, "False", omniav1.ReasonPromptPackRefInvalid}, ""},
		{"live pack: usable", inputs(agentSpec(nil), []omniav1.PromptPack{livePack()}, readyProvider(nil)),
			true, "", false, [3]string{omniav1.ConditionPromptPackReady, "True", omniav1.ReasonPromptPackFound}, "live"},
		{"stable track serves the Active version, not a higher failed one", inputs(agentSpec(nil), ok, readyProvider(nil)),
			true, "", false, [3]string{omniav1.ConditionPromptPackReady, "True", omniav1.ReasonPromptPackFound}, "v2"},
		{"a superseded version can be pinned", inputs(agentSpec(func(a *omniav1.AgentRuntime) { a.Spec.PromptPackRef.Version = v("1.0.0") }), ok, readyProvider(nil)),
			true, "", false, [3]string{omniav1.ConditionPromptPackReady, "True", omniav1.ReasonPromptPackFound}, "v1"},
		{"toolRegistryRef set, registry missing: continue without tools", inputs(agentSpec(func(a *omniav1.AgentRuntime) {
			a.Spec.ToolRegistryRef = &omniav1.ToolRegistryRef{Name: "tools"}
		}), ok, readyProvider(nil)), true, "", false, [3]string{omniav1.ConditionToolRegistryReady, "False", omniav1.ReasonToolRegistryNotFound}, "v2"},
		{"toolRegistryRef in another namespace: continue without tools", inputs(agentSpec(func(a *omniav1.AgentRuntime) {
			a.Spec.ToolRegistryRef = &omniav1.ToolRegistryRef{Name: "tools", Namespace: &other}
		}), ok, readyProvider(nil)), true, "", false, [3]string{omniav1.ConditionToolRegistryReady, "False", omniav1.ReasonToolRegistryCrossNamespace}, "v2"},
		{"Provider missing: Failed, retried", inputs(agentSpec(nil), ok, nil),
			false, omniav1.AgentRuntimePhaseFailed, true, [3]string{omniav1.ConditionProviderReady, "False", omniav1.ReasonProviderNotFound}, ""},
		{"providerRef in another namespace: Failed, retried", inputs(agentSpec(func(a *omniav1.AgentRuntime) { a.Spec.Providers[0].ProviderRef.Namespace = &other }), ok, readyProvider(nil)),
			false, omniav1.AgentRuntimePhaseFailed, true, [3]string{omniav1.ConditionProviderReady, "False", omniav1.ReasonProviderCrossNamespace}, ""},
		{"role mismatch: Failed, not retried", inputs(agentSpec(nil), ok, readyProvider(func(p *omniav1.Provider) { p.Spec.Role = omniav1.ProviderRoleEmbedding })),
			false, omniav1.AgentRuntimePhaseFailed, false, [3]string{omniav1.ConditionProviderReady, "False", omniav1.ReasonRoleMismatch}, ""},
		{"Provider not Ready: Pending, not retried", inputs(agentSpec(nil), ok, readyProvider(func(p *omniav1.Provider) { p.Status.Phase = omniav1.ProviderPhaseUnavailable })),
			false, omniav1.AgentRuntimePhasePending, false, [3]string{omniav1.ConditionProviderReady, "False", omniav1.ReasonProviderNotReady}, ""},
		{"Provider lacks a required capability: Pending, not retried", inputs(agentSpec(nil), ok, readyProvider(func(p *omniav1.Provider) { p.Spec.Capabilities = nil })),
			false, omniav1.AgentRuntimePhasePending, false, [3]string{omniav1.ConditionProviderReady, "False", omniav1.ReasonCapabilityMismatch}, ""},
		{"everything usable", inputs(agentSpec(nil), ok, readyProvider(nil)),
			true, "", false, [3]string{omniav1.ConditionProviderReady, "True", omniav1.ReasonProviderFound}, "v2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var conds []metav1.Condition
			res := Resolve(tc.in, &conds, t0)
			if res.Usable != tc.usable || res.Phase != tc.phase || (res.Retry != nil) != tc.retry {
				t.Fatalf("usable=%v phase=%q retry=%v; want %v %q %v (%+v)", res.Usable, res.Phase, res.Retry, tc.usable, tc.phase, tc.retry, conds)
			}
			c := meta.FindStatusCondition(conds, tc.cond[0])
			if c == nil || string(c.Status) != tc.cond[1] || c.Reason != tc.cond[2] {
				t.Fatalf("condition %s = %+v, want %s/%s", tc.cond[0], c, tc.cond[1], tc.cond[2])
			}
			if tc.pack != "" && (res.Pack == nil || res.Pack.Name != tc.pack) {
				t.Fatalf("pack %+v, want %s", res.Pack, tc.pack)
			}
			if !tc.usable && tc.cond[0] == omniav1.ConditionPromptPackReady && meta.FindStatusCondition(conds, omniav1.ConditionProviderReady) != nil {
				t.Fatal("providers judged after the PromptPack blocked")
			}
		})
	}
}
