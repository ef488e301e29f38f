package v1alpha1

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func raw(s string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(s)} }

func TestDecodeExtraVolumes(t *testing.T) {
	for _, c := range []struct {
		name    string
		in      []apiextensionsv1.JSON
		want    []string // volume names
		wantErr string
	}{
		{"none", nil, nil, ""},
		{"two volumes", []apiextensionsv1.JSON{raw(`{"name":"a","emptyDir":{}}`), raw(`{"name":"b","configMap":{"name":"cm"}}`)}, []string{"a", "b"}, ""},
		{"unknown field is an error", []apiextensionsv1.JSON{raw(`{"name":"a","emptyDirr":{}}`)}, nil, "extraVolumes[0]"},
		{"missing name is an error", []apiextensionsv1.JSON{raw(`{"emptyDir":{}}`)}, nil, "name is required"},
		{"wrong type is an error", []apiextensionsv1.JSON{raw(`{"name":3}`)}, nil, "extraVolumes[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &PodOverrides{ExtraVolumes: c.in}
			got, err := p.DecodeExtraVolumes()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %d volumes, want %d", len(got), len(c.want))
			}
			for i := range got {
				if got[i].Name != c.want[i] {
					t.Errorf("volume %d named %q, want %q", i, got[i].Name, c.want[i])
				}
			}
		})
	}
	var nilOverrides *PodOverrides
	if v, err := nilOverrides.DecodeExtraVolumes(); v != nil || err != nil {
		t.Errorf("nil overrides: %v, %v", v, err)
	}
	var nilRuntime *RuntimeConfig
	if v, err := nilRuntime.DecodeVolumes(); v != nil || err != nil {
		t.Errorf("nil runtime: %v, %v", v, err)
	}
	rt := &RuntimeConfig{Volumes: []apiextensionsv1.JSON{raw(`{"name":"cache","emptyDir":{"sizeLimit":"1Gi"}}`), raw(`{"name":"x","secrett":{}}`)}}
	if _, err := rt.DecodeVolumes(); err == nil || !strings.Contains(err.Error(), "runtime.volumes[1]") {
		t.Errorf("runtime volumes: error %v, want one naming runtime.volumes[1]", err)
	}
}

func TestPromptPackRefChannel(t *testing.T) {
	pre := ChannelPrerelease
	for _, c := range []struct {
		name string
		ref  PromptPackRef
		want PromptPackChannel
	}{
		{"neither version nor track follows stable", PromptPackRef{Name: "p"}, ChannelStable},
		{"track prerelease", PromptPackRef{Name: "p", Track: &pre}, ChannelPrerelease},
		{"version pin follows no channel", PromptPackRef{Name: "p", Version: ptr("1.0.0")}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.ref.Channel(); got != c.want {
				t.Errorf("Channel() = %q, want %q", got, c.want)
			}
		})
	}
}

func TestPrimaryFacade(t *testing.T) {
	for _, c := range []struct {
		name    string
		facades []FacadeType
		want    FacadeType
	}{
		{"websocket first", []FacadeType{FacadeTypeA2A, FacadeTypeWebSocket}, FacadeTypeWebSocket},
		{"rest before mcp", []FacadeType{FacadeTypeMCP, FacadeTypeREST}, FacadeTypeREST},
		{"a2a before custom", []FacadeType{FacadeTypeCustom, FacadeTypeA2A}, FacadeTypeA2A},
		{"mcp alone", []FacadeType{FacadeTypeMCP}, FacadeTypeMCP},
		{"none", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s AgentRuntimeSpec
			for _, f := range c.facades {
				s.Facades = append(s.Facades, FacadeConfig{Type: f})
			}
			got := s.PrimaryFacade()
			switch {
			case c.want == "" && got != nil:
				t.Errorf("PrimaryFacade() = %s, want none", got.Type)
			case c.want != "" && (got == nil || got.Type != c.want):
				t.Errorf("PrimaryFacade() = %v, want %s", got, c.want)
			}
		})
	}
}

func TestAgentRuntimeDefaultsWhenUnset(t *testing.T) {
	var s AgentRuntimeSpec
	if s.EffectiveMode() != AgentModeAgent {
		t.Errorf("mode = %s, want agent", s.EffectiveMode())
	}
	if s.EffectiveIdleAction() != IdleScaleToZero {
		t.Errorf("idle action = %s, want scaleToZero", s.EffectiveIdleAction())
	}
	s.IdleAction = IdleDelete
	if s.EffectiveIdleAction() != IdleDelete {
		t.Errorf("idle action = %s, want delete", s.EffectiveIdleAction())
	}
	if (NamedProviderRef{}).EffectiveRole() != ProviderRoleLLM {
		t.Error("unset provider ref role is not llm")
	}
}

func TestSchemeRegistersEveryKind(t *testing.T) {
	s := newScheme(t)
	for _, k := range []string{"AgentRuntime", "PromptPack", "ToolRegistry", "Provider", "ToolPolicy", "SandboxClass", "Connection"} {
		for _, kind := range []string{k, k + "List"} {
			if !s.Recognizes(GroupVersion.WithKind(kind)) {
				t.Errorf("scheme does not recognise %s", kind)
			}
		}
	}
}
