package v1alpha1

import (
	"slices"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestDefaultCredentialKeys(t *testing.T) {
	for _, c := range []struct {
		typ  ProviderType
		want []string
	}{
		{ProviderTypeClaude, []string{"ANTHROPIC_API_KEY", "CLAUDE_API_KEY", "api-key"}},
		{ProviderTypeOpenAI, []string{"OPENAI_API_KEY", "OPENAI_TOKEN", "api-key"}},
		{ProviderTypeGemini, []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "api-key"}},
		{ProviderTypeVoyageAI, []string{"VOYAGE_API_KEY", "api-key"}},
		{ProviderTypeElevenLabs, []string{"api-key", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"}},
		{ProviderTypeHuggingFace, []string{"api-key", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"}},
	} {
		t.Run(string(c.typ), func(t *testing.T) {
			if got := DefaultCredentialKeys(c.typ); !slices.Equal(got, c.want) {
				t.Errorf("DefaultCredentialKeys(%s) = %v, want %v", c.typ, got, c.want)
			}
		})
	}
}

func TestCredentialKeys(t *testing.T) {
	for _, c := range []struct {
		name string
		spec ProviderSpec
		want []string
	}{
		{"no credential", ProviderSpec{Type: ProviderTypeClaude}, nil},
		{"env var only", ProviderSpec{Type: ProviderTypeClaude, Credential: &CredentialConfig{EnvVar: "KEY"}}, nil},
		{"explicit key wins", ProviderSpec{Type: ProviderTypeClaude, Credential: &CredentialConfig{SecretRef: &SecretKeyRef{Name: "s", Key: ptr("my-key")}}}, []string{"my-key"}},
		{"empty key means defaults", ProviderSpec{Type: ProviderTypeOpenAI, Credential: &CredentialConfig{SecretRef: &SecretKeyRef{Name: "s", Key: ptr("")}}}, []string{"OPENAI_API_KEY", "OPENAI_TOKEN", "api-key"}},
		{"no key means type defaults", ProviderSpec{Type: ProviderTypeGemini, Credential: &CredentialConfig{SecretRef: &SecretKeyRef{Name: "s"}}}, []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "api-key"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.spec.CredentialKeys(); !slices.Equal(got, c.want) {
				t.Errorf("CredentialKeys() = %v, want %v", got, c.want)
			}
		})
	}
}

func TestPlatformCredentialKeys(t *testing.T) {
	for _, c := range []struct {
		name     string
		platform PlatformType
		auth     PlatformAuthType
		want     []string
	}{
		{"bedrock access key", PlatformBedrock, PlatformAuthAccessKey, []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}},
		{"vertex service account", PlatformVertex, PlatformAuthServiceAccount, []string{"credentials.json"}},
		{"azure service principal", PlatformAzure, PlatformAuthServicePrincipal, []string{"AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET"}},
		{"workload identity reads no secret", PlatformBedrock, PlatformAuthWorkloadIdentity, nil},
		{"mismatched pair", PlatformVertex, PlatformAuthAccessKey, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := PlatformCredentialKeys(c.platform, c.auth); !slices.Equal(got, c.want) {
				t.Errorf("PlatformCredentialKeys(%s, %s) = %v, want %v", c.platform, c.auth, got, c.want)
			}
		})
	}
}

func TestRequiresCredential(t *testing.T) {
	for _, c := range []struct {
		name string
		spec ProviderSpec
		want bool
	}{
		{"claude direct", ProviderSpec{Type: ProviderTypeClaude}, true},
		{"voyageai direct", ProviderSpec{Type: ProviderTypeVoyageAI}, true},
		{"mock needs none", ProviderSpec{Type: ProviderTypeMock}, false},
		{"ollama needs none", ProviderSpec{Type: ProviderTypeOllama}, false},
		{"vllm needs none", ProviderSpec{Type: ProviderTypeVLLM}, false},
		{"platform hosted uses auth instead", ProviderSpec{Type: ProviderTypeClaude, Platform: &ProviderPlatform{Type: PlatformBedrock}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.spec.RequiresCredential(); got != c.want {
				t.Errorf("RequiresCredential() = %v, want %v", got, c.want)
			}
		})
	}
}

func TestProviderEffectiveRoleAndCapabilities(t *testing.T) {
	s := ProviderSpec{Type: ProviderTypeClaude, Capabilities: []ProviderCapability{CapabilityTools}}
	if s.EffectiveRole() != ProviderRoleLLM {
		t.Errorf("unset role = %s, want llm", s.EffectiveRole())
	}
	s.Role = ProviderRoleEmbedding
	if s.EffectiveRole() != ProviderRoleEmbedding {
		t.Errorf("role = %s, want embedding", s.EffectiveRole())
	}
	if !s.HasCapability(CapabilityTools) || s.HasCapability(CapabilityVision) {
		t.Errorf("HasCapability wrong for %v", s.Capabilities)
	}
}
