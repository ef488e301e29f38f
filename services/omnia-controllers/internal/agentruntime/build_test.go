package agentruntime

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

func resolved(t *testing.T, in Inputs) Resolution {
	t.Helper()
	var conds []metav1.Condition
	res := Resolve(in, &conds, t0)
	if !res.Usable {
		t.Fatalf("not usable: %+v", conds)
	}
	return res
}

// mustBuild builds the Deployment of resolved inputs with image runtime:1
// (and facade:1 when cfg names no facade image).
func mustBuild(t *testing.T, in Inputs, cfg Config) *appsv1.Deployment {
	t.Helper()
	if cfg.FacadeImage == "" {
		cfg.FacadeImage = "facade:1"
	}
	d, err := BuildDeployment(in, resolved(t, in), cfg, "runtime:1")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPodTemplateChangesOnlyWithInputs: the template is a function of the
// inputs: identical inputs give an identical template, and each input
// (pack version or content, registry tools, provider settings, credential
// data) moves the config hash, while agent metadata does not.
func TestPodTemplateChangesOnlyWithInputs(t *testing.T) {
	cfg := Config{RuntimeImage: "runtime:1"}
	base := func() Inputs {
		in := inputs(agentSpec(func(a *omniav1.AgentRuntime) { a.Spec.ToolRegistryRef = &omniav1.ToolRegistryRef{Name: "tools"} }),
			[]omniav1.PromptPack{ppack("v2", "2.0.0", omniav1.PromptPackPhaseActive)},
			readyProvider(func(p *omniav1.Provider) {
				p.Spec.Type, p.Spec.Model = omniav1.ProviderTypeOpenAI, "gpt"
				p.Spec.Credential = &omniav1.CredentialConfig{SecretRef: &omniav1.SecretKeyRef{Name: "key"}}
			}))
		in.Registry = &omniav1.ToolRegistry{ObjectMeta: metav1.ObjectMeta{Name: "tools", Generation: 1}}
		in.Secrets["key"] = &corev1.Secret{Data: map[string][]byte{"OPENAI_API_KEY": []byte("sk-1")}}
		return in
	}
	hash := func(in Inputs) string {
		d := mustBuild(t, in, cfg)
		return AppliedHash(d.Spec.Template)
	}
	ref := hash(base())
	if hash(base()) != ref {
		t.Fatal("same inputs, different template")
	}
	unrelated := base()
	unrelated.Agent.Labels = map[string]string{"team": "x"}
	unrelated.Agent.Status.Phase = omniav1.AgentRuntimePhaseRunning
	unrelated.Packs[0].Status.Conditions = []metav1.Condition{{Type: "AgentsNotified"}}
	if hash(unrelated) != ref {
		t.Fatal("agent metadata or pack status noise changed the template")
	}
	for name, mut := range map[string]func(*Inputs){
		"pack content":   func(in *Inputs) { in.Packs[0].Status.ContentDigest = "sha256:other" },
		"pack version":   func(in *Inputs) { in.Packs[0].Spec.Version = "2.1.0" },
		"registry tools": func(in *Inputs) { in.Registry.Spec.Handlers = []omniav1.HandlerDefinition{httpHandler("weather", "w")} },
		"model":          func(in *Inputs) { in.Providers["ns/llm"].Spec.Model = "gpt-5" },
		"credential":     func(in *Inputs) { in.Secrets["key"].Data["OPENAI_API_KEY"] = []byte("sk-2") },
		// The Provider can still read Ready when its Secret is gone.
		"credential Secret deleted": func(in *Inputs) { delete(in.Secrets, "key") },
	} {
		in := base()
		mut(&in)
		if hash(in) == ref {
			t.Errorf("%s changed but the template did not", name)
		}
	}
	d := mustBuild(t, base(), cfg)
	var keyEnv *corev1.EnvVar
	for i, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "OMNIA_PROVIDER_DEFAULT_API_KEY" {
			keyEnv = &d.Spec.Template.Spec.Containers[0].Env[i]
		}
		if e.Value == "sk-1" {
			t.Fatal("the API key value is in the pod template")
		}
	}
	if keyEnv == nil || keyEnv.ValueFrom.SecretKeyRef.Key != "OPENAI_API_KEY" {
		t.Fatalf("key env %+v", keyEnv)
	}
}

func TestBuildHPAAndService(t *testing.T) {
	a := agentSpec(nil)
	in := Inputs{Agent: a}
	if BuildHPA(in) != nil {
		t.Fatal("HPA without autoscaling")
	}
	if r := desiredReplicas(in); r == nil || *r != 1 {
		t.Fatalf("replicas %v", r)
	}
	a.Spec.Runtime = &omniav1.RuntimeConfig{Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MaxReplicas: ptr(int32(5))}}
	h := BuildHPA(in)
	if h == nil || *h.Spec.MinReplicas != 1 || h.Spec.MaxReplicas != 5 || len(h.Spec.Metrics) != 2 || h.Spec.Metrics[0].Resource.Name != corev1.ResourceMemory {
		t.Fatalf("hpa %+v", h)
	}
	if desiredReplicas(in) != nil {
		t.Fatal("an autoscaled Deployment must leave replicas to the HPA")
	}
	a.Spec.Facades = []omniav1.FacadeConfig{{Type: omniav1.FacadeTypeA2A, Port: ptr(int32(9999))}, {Type: omniav1.FacadeTypeWebSocket, Port: ptr(int32(8000))}}
	s := BuildService(a)
	if len(s.Spec.Ports) != 2 || s.Spec.Ports[0].Port != 8000 || s.Spec.Ports[0].Name != "facade" {
		t.Fatalf("ports %+v", s.Spec.Ports)
	}
	if _, ok := s.Spec.Selector[omniav1.LabelTrack]; ok {
		t.Fatal("the Service selector must not pin the track")
	}
}

func TestRuntimeImage(t *testing.T) {
	a := agentSpec(nil)
	if _, err := RuntimeImage(a, Config{}); err == nil {
		t.Fatal("no image configured must be an error")
	}
	if img, _ := RuntimeImage(a, Config{RuntimeImage: "rt:1"}); img != "rt:1" {
		t.Fatal(img)
	}
	a.Spec.Framework = &omniav1.FrameworkConfig{Type: omniav1.FrameworkLangChain}
	if _, err := RuntimeImage(a, Config{RuntimeImage: "rt:1"}); err == nil {
		t.Fatal("langchain without image must be an error")
	}
}

// TestMissingToolRegistryBuildsWithoutTools: a registry that cannot be
// used is recorded in ToolRegistryReady=False and the Deployment is built
// without tools: with the registry missing or in another namespace the
// pod is still built and names no registry; with it found the pod names
// it (OMNIA_TOOLREGISTRY is how the runtime finds its tools).
func TestMissingToolRegistryBuildsWithoutTools(t *testing.T) {
	other := "other"
	packs := []omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)}
	withRef := func(ns *string) *omniav1.AgentRuntime {
		return agentSpec(func(a *omniav1.AgentRuntime) {
			a.Spec.ToolRegistryRef = &omniav1.ToolRegistryRef{Name: "tools", Namespace: ns}
		})
	}
	found := &omniav1.ToolRegistry{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: "ns", Generation: 1}}
	cases := []struct {
		name     string
		agent    *omniav1.AgentRuntime
		registry *omniav1.ToolRegistry
		wantEnv  string // OMNIA_TOOLREGISTRY; "" for absent
	}{
		{"no toolRegistryRef: no tools", agentSpec(nil), nil, ""},
		{"toolRegistryRef to a missing registry: built without tools", withRef(nil), nil, ""},
		{"toolRegistryRef to another namespace: built without tools", withRef(&other), found, ""},
		{"toolRegistryRef found: the pod names the registry", withRef(nil), found, "tools"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := inputs(tc.agent, packs, readyProvider(nil))
			// Handed even to the cross-namespace case: the resolver, not
			// only the reader, must refuse a registry of another namespace.
			in.Registry = tc.registry
			d := mustBuild(t, in, Config{})
			got := ""
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "OMNIA_TOOLREGISTRY" {
					got = e.Value
				}
			}
			if got != tc.wantEnv {
				t.Fatalf("OMNIA_TOOLREGISTRY = %q, want %q", got, tc.wantEnv)
			}
		})
	}
}
