package api_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1alpha1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// TestOmniaAdmissionRules creates Omnia objects that each break one
// admission rule — the checks the Omnia operator makes in its webhooks or leaves
// to the controller, where a CEL rule or a schema keyword can state them —
// and the valid shapes beside them. A refusal must name the field.
func TestOmniaAdmissionRules(t *testing.T) {
	ns := env.Namespace(t)
	agent := func(mutate func(*omniav1alpha1.AgentRuntimeSpec)) client.Object {
		a := &omniav1alpha1.AgentRuntime{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "ar-", Namespace: ns},
			Spec: omniav1alpha1.AgentRuntimeSpec{
				PromptPackRef: omniav1alpha1.PromptPackRef{Name: "support"},
				Facades:       []omniav1alpha1.FacadeConfig{{Type: omniav1alpha1.FacadeTypeWebSocket}},
			},
		}
		mutate(&a.Spec)
		return a
	}
	weight := func(w int32) omniav1alpha1.RolloutStep { return omniav1alpha1.RolloutStep{SetWeight: &w} }
	rollout := func(mutate func(*omniav1alpha1.RolloutConfig)) client.Object {
		return agent(func(s *omniav1alpha1.AgentRuntimeSpec) {
			s.Rollout = &omniav1alpha1.RolloutConfig{Steps: []omniav1alpha1.RolloutStep{weight(50)}}
			mutate(s.Rollout)
		})
	}
	mesh := &omniav1alpha1.MeshTrafficRouting{Hosts: []string{"support.example"}}
	istio := &omniav1alpha1.IstioTrafficRouting{
		VirtualService:  omniav1alpha1.IstioVirtualServiceRef{Name: "support", Routes: []string{"primary"}},
		DestinationRule: omniav1alpha1.IstioDestinationRuleRef{Name: "support"},
	}
	routing := func(mode omniav1alpha1.TrafficRoutingMode, m *omniav1alpha1.MeshTrafficRouting, i *omniav1alpha1.IstioTrafficRouting) client.Object {
		return rollout(func(r *omniav1alpha1.RolloutConfig) {
			r.TrafficRouting = &omniav1alpha1.TrafficRoutingConfig{Mode: mode, Mesh: m, Istio: i}
		})
	}
	taskStore := func(typ omniav1alpha1.StoreType, url string, secret *omniav1alpha1.LocalObjectReference) client.Object {
		return agent(func(s *omniav1alpha1.AgentRuntimeSpec) {
			s.Facades = []omniav1alpha1.FacadeConfig{{Type: omniav1alpha1.FacadeTypeA2A, A2A: &omniav1alpha1.A2AConfig{
				Enabled: true, TaskStore: &omniav1alpha1.A2ATaskStore{Type: typ, RedisURL: url, RedisSecretRef: secret}}}}
		})
	}
	convStore := func(typ omniav1alpha1.StoreType, ref *omniav1alpha1.LocalObjectReference) client.Object {
		return agent(func(s *omniav1alpha1.AgentRuntimeSpec) {
			s.Context = &omniav1alpha1.ContextConfig{Type: typ, StoreRef: ref}
		})
	}
	candidateVersion := func(v string) client.Object {
		return rollout(func(r *omniav1alpha1.RolloutConfig) {
			r.Candidate = &omniav1alpha1.CandidateOverrides{PromptPackRef: &omniav1alpha1.PromptPackRef{Name: "support", Version: &v}}
		})
	}
	redisSecret := &omniav1alpha1.LocalObjectReference{Name: "redis"}
	const (
		redis  = omniav1alpha1.StoreType("redis")
		memory = omniav1alpha1.StoreType("memory")
	)

	provider := &omniav1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-", Namespace: ns},
		Spec: omniav1alpha1.ProviderSpec{Type: omniav1alpha1.ProviderTypeOpenAI, Role: omniav1alpha1.ProviderRoleTTS, Model: "tts-1",
			TTS: &omniav1alpha1.TTSConfig{Voice: "alloy"}, STT: &omniav1alpha1.STTConfig{Language: "en"}}}

	cases := []struct {
		rule string
		obj  client.Object
		// want are the substrings the refusal must hold; none: accepted.
		want []string
	}{
		// A rollout step does one thing, and a weight is a percentage.
		{"rollout step: a step that sets none of setWeight, pause and analysis is refused",
			rollout(func(r *omniav1alpha1.RolloutConfig) { r.Steps = []omniav1alpha1.RolloutStep{{}} }),
			[]string{"spec.rollout.steps[0]", "set exactly one of setWeight, pause and analysis"}},
		{"rollout step: setWeight above 100 is refused",
			rollout(func(r *omniav1alpha1.RolloutConfig) { r.Steps = []omniav1alpha1.RolloutStep{weight(101)} }),
			[]string{"spec.rollout.steps[0].setWeight", "100"}},
		{"rollout step: setWeight below 0 is refused",
			rollout(func(r *omniav1alpha1.RolloutConfig) { r.Steps = []omniav1alpha1.RolloutStep{weight(-1)} }),
			[]string{"spec.rollout.steps[0].setWeight", "0"}},
		{"rollout step: setWeight 0 and 100 are accepted",
			rollout(func(r *omniav1alpha1.RolloutConfig) { r.Steps = []omniav1alpha1.RolloutStep{weight(0), weight(100)} }), nil},
		{"rollout: an empty step list is refused",
			rollout(func(r *omniav1alpha1.RolloutConfig) { r.Steps = []omniav1alpha1.RolloutStep{} }),
			[]string{"spec.rollout.steps", "at least 1"}},
		{"rollout: 33 steps are refused",
			rollout(func(r *omniav1alpha1.RolloutConfig) { r.Steps = make([]omniav1alpha1.RolloutStep, 33) }),
			[]string{"spec.rollout.steps", "32"}},

		// Versions are semver 2.0, wherever a PromptPack version is named.
		{"semver: a candidate promptPackRef.version without a patch number is refused",
			candidateVersion("1.2"), []string{"spec.rollout.candidate.promptPackRef.version", "should match"}},
		{"semver: a candidate promptPackRef.version with a leading zero is refused",
			candidateVersion("1.02.0"), []string{"spec.rollout.candidate.promptPackRef.version"}},
		{"semver: a candidate version with a leading v, a prerelease and build metadata is accepted",
			candidateVersion("v2.0.0-rc.1+build.7"), nil},

		// trafficRouting: operator-owned mesh routing and your own Istio
		// objects exclude each other, and neither sits beside a mode that
		// would ignore it.
		{"trafficRouting: mesh and istio together are refused",
			routing("", mesh, istio), []string{"spec.rollout.trafficRouting.istio", "set mesh or istio, not both"}},
		{"trafficRouting: mode external without istio is refused",
			routing(omniav1alpha1.TrafficRoutingExternal, nil, nil), []string{"spec.rollout.trafficRouting.istio", "required when trafficRouting.mode is external"}},
		{"trafficRouting: istio beside mode replicaWeighted is refused",
			routing(omniav1alpha1.TrafficRoutingReplicaWeighted, nil, istio), []string{"spec.rollout.trafficRouting.istio", "may only be set when trafficRouting.mode is external"}},
		{"trafficRouting: istio beside mode mesh is refused",
			routing(omniav1alpha1.TrafficRoutingMesh, nil, istio), []string{"spec.rollout.trafficRouting.istio", "may only be set when trafficRouting.mode is external"}},
		{"trafficRouting: mesh beside mode replicaWeighted is refused",
			routing(omniav1alpha1.TrafficRoutingReplicaWeighted, mesh, nil), []string{"spec.rollout.trafficRouting.mesh", "may only be set when trafficRouting.mode is mesh"}},
		{"trafficRouting: mode external with istio is accepted", routing(omniav1alpha1.TrafficRoutingExternal, nil, istio), nil},
		{"trafficRouting: istio with the mode unset is accepted", routing("", nil, istio), nil},
		{"trafficRouting: mode mesh with mesh is accepted", routing(omniav1alpha1.TrafficRoutingMesh, mesh, nil), nil},
		{"trafficRouting: mesh with the mode unset is accepted", routing("", mesh, nil), nil},
		{"trafficRouting: mode replicaWeighted alone is accepted", routing(omniav1alpha1.TrafficRoutingReplicaWeighted, nil, nil), nil},

		// The A2A task store names Redis once, and only for type redis.
		{"taskStore: redisURL and redisSecretRef together are refused",
			taskStore(redis, "redis://redis:6379", redisSecret), []string{"spec.facades[0].a2a.taskStore.redisSecretRef", "set redisURL or redisSecretRef, not both"}},
		{"taskStore: redisURL with type memory is refused",
			taskStore(memory, "redis://redis:6379", nil), []string{"spec.facades[0].a2a.taskStore", "taskStore.redisURL and taskStore.redisSecretRef may only be set when taskStore.type is redis"}},
		{"taskStore: redisSecretRef with type memory is refused",
			taskStore(memory, "", redisSecret), []string{"spec.facades[0].a2a.taskStore", "may only be set when taskStore.type is redis"}},
		{"taskStore: type redis with redisSecretRef alone is accepted", taskStore(redis, "", redisSecret), nil},
		{"taskStore: type redis with redisURL alone is accepted", taskStore(redis, "redis://redis:6379", nil), nil},

		// An A2A client is another AgentRuntime or a URL, never both.
		{"a2a client: agentRuntimeRef and url together are refused",
			agent(func(s *omniav1alpha1.AgentRuntimeSpec) {
				s.Facades = []omniav1alpha1.FacadeConfig{{Type: omniav1alpha1.FacadeTypeA2A, A2A: &omniav1alpha1.A2AConfig{Enabled: true,
					Clients: []omniav1alpha1.A2AClient{{Name: "billing", AgentRuntimeRef: &omniav1alpha1.LocalObjectReference{Name: "billing"}, URL: "https://billing.example"}}}}}
			}), []string{"spec.facades[0].a2a.clients[0]", "set exactly one of agentRuntimeRef and url"}},

		// The conversation store names a Secret only for redis.
		{"context: storeRef with type memory is refused",
			convStore(memory, redisSecret), []string{"spec.context.storeRef", "may only be set when context.type is redis"}},
		{"context: type redis with storeRef is accepted", convStore(redis, redisSecret), nil},
		{"context: type memory alone is accepted", convStore(memory, nil), nil},

		// A Provider serves one role, so it carries at most one role block.
		{"provider: tts and stt together are refused", provider, []string{"spec", "only one of spec.tts, spec.stt and spec.embedding may be set"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			checkAdmission(t, c.obj, c.want)
		})
	}
}
