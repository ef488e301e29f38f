package v1alpha1

// Provider condition types, set on Provider status.conditions.
const (
	// ConditionSecretFound: the Secret named by credential.secretRef exists
	// and holds a usable key.
	ConditionSecretFound = "SecretFound"
	// ConditionCredentialConfigured: exactly one credential strategy is
	// configured and it resolves to a non-placeholder value.
	ConditionCredentialConfigured = "CredentialConfigured"
	// ConditionCredentialValid: the vendor accepted the credential when
	// probed.
	ConditionCredentialValid = "CredentialValid"
	// ConditionAuthConfigured: the platform authentication of a
	// platform-hosted Provider is complete.
	ConditionAuthConfigured = "AuthConfigured"
	// ConditionEndpointReachable: the model endpoint answered over the
	// network (any HTTP status counts).
	ConditionEndpointReachable = "EndpointReachable"
	// ConditionModelValid: spec.model is set where one is required.
	ConditionModelValid = "ModelValid"
)

// Provider condition reasons.
const (
	ReasonSecretFound               = "SecretFound"
	ReasonNoSecretRequired          = "NoSecretRequired"
	ReasonSecretNotFound            = "SecretNotFound"
	ReasonSecretKeyMissing          = "SecretKeyMissing"
	ReasonNoCredentialRequired      = "NoCredentialRequired"
	ReasonEnvVarConfigured          = "EnvVarConfigured"
	ReasonFilePathConfigured        = "FilePathConfigured"
	ReasonCredentialRequired        = "CredentialRequired"
	ReasonNoStrategySpecified       = "NoStrategySpecified"
	ReasonMultipleStrategies        = "MultipleStrategies"
	ReasonPlaceholderCredential     = "PlaceholderCredential"
	ReasonInvalidEnvVar             = "InvalidEnvVar"
	ReasonInvalidFilePath           = "InvalidFilePath"
	ReasonCredentialAccepted        = "CredentialAccepted"
	ReasonCredentialRejected        = "CredentialRejected"
	ReasonValidationNotSupported    = "ValidationNotSupported"
	ReasonCredentialValidationError = "CredentialValidationError"
	// ReasonCredentialProbeRefused: the probe would have sent the key
	// over plain http, or to a host plain http is not allowed to.
	ReasonCredentialProbeRefused     = "CredentialProbeRefused"
	ReasonWorkloadIdentityConfigured = "WorkloadIdentityConfigured"
	ReasonAuthConfigured             = "AuthConfigured"
	ReasonAuthRequired               = "AuthRequired"
	ReasonCredentialsSecretRefNeeded = "CredentialsSecretRefRequired"
	ReasonCredentialsSecretNotFound  = "CredentialsSecretNotFound"
	ReasonEndpointReachable          = "EndpointReachable"
	ReasonEndpointUnreachable        = "EndpointUnreachable"
	ReasonModelNotRequired           = "ModelNotRequired"
	ReasonModelSet                   = "ModelSet"
	ReasonModelMissing               = "ModelMissing"
)

// Event reasons emitted by the Provider controller (all Warning).
const (
	EventCredentialInvalid   = "CredentialInvalid"
	EventMultipleCredentials = "MultipleCredentials"
	EventModelInvalid        = "ModelInvalid"
)

// EffectiveRole is the Provider's role, llm when unset.
func (s *ProviderSpec) EffectiveRole() ProviderRole {
	if s.Role == "" {
		return ProviderRoleLLM
	}
	return s.Role
}

// IsPlatformHosted reports whether requests go through a cloud platform
// (spec.platform) rather than the vendor's own API.
func (s *ProviderSpec) IsPlatformHosted() bool { return s.Platform != nil }

// RequiresCredential reports whether a credential block is required: direct
// vendor access needs one, except for the mock, ollama and vllm types, which
// run without a key; platform-hosted Providers authenticate through auth.
func (s *ProviderSpec) RequiresCredential() bool {
	if s.IsPlatformHosted() {
		return false
	}
	switch s.Type {
	case ProviderTypeMock, ProviderTypeOllama, ProviderTypeVLLM:
		return false
	}
	return true
}

// HasCapability reports whether spec.capabilities lists c.
func (s *ProviderSpec) HasCapability(c ProviderCapability) bool {
	for _, have := range s.Capabilities {
		if have == c {
			return true
		}
	}
	return false
}

// DefaultCredentialKeys lists, in lookup order, the Secret keys tried for a
// Provider of type t when credential.secretRef names no key. The first key
// present in the Secret wins.
func DefaultCredentialKeys(t ProviderType) []string {
	switch t {
	case ProviderTypeClaude:
		return []string{"ANTHROPIC_API_KEY", "CLAUDE_API_KEY", "api-key"}
	case ProviderTypeOpenAI:
		return []string{"OPENAI_API_KEY", "OPENAI_TOKEN", "api-key"}
	case ProviderTypeGemini:
		return []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "api-key"}
	case ProviderTypeVoyageAI:
		return []string{"VOYAGE_API_KEY", "api-key"}
	default:
		return []string{"api-key", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"}
	}
}

// CredentialKeys lists the keys to look up in the Secret of
// credential.secretRef: the explicit key when one is set, else the type's
// default keys. It returns nil when no secretRef is configured.
func (s *ProviderSpec) CredentialKeys() []string {
	if s.Credential == nil || s.Credential.SecretRef == nil {
		return nil
	}
	if k := s.Credential.SecretRef.KeyOr(""); k != "" {
		return []string{k}
	}
	return DefaultCredentialKeys(s.Type)
}

// PlatformCredentialKeys lists the keys that must all be present in the
// Secret of auth.credentialsSecretRef when it names no key, for the platform
// and authentication type given. It returns nil for combinations that read
// no Secret (workloadIdentity) or are not valid.
func PlatformCredentialKeys(p PlatformType, a PlatformAuthType) []string {
	switch {
	case p == PlatformBedrock && a == PlatformAuthAccessKey:
		return []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
	case p == PlatformVertex && a == PlatformAuthServiceAccount:
		return []string{"credentials.json"}
	case p == PlatformAzure && a == PlatformAuthServicePrincipal:
		return []string{"AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET"}
	}
	return nil
}
