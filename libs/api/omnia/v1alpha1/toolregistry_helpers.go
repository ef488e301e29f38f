package v1alpha1

// ToolRegistry condition types, set on ToolRegistry status.conditions.
const (
	// ConditionHandlersValid: every handler passed validation.
	ConditionHandlersValid = "HandlersValid"
	// ConditionToolsDiscovered reports how many tools the handlers produced.
	ConditionToolsDiscovered = "ToolsDiscovered"
	// ConditionPolicyBound: a ToolPolicy in the namespace selects this
	// registry (spec.selector.registry) and has compiled. False when no
	// policy selects the registry or a selecting policy failed to compile.
	ConditionPolicyBound = "PolicyBound"
	// ConditionSandboxesValid: every SandboxClass named by a handler's
	// sandbox.className exists and is Ready.
	ConditionSandboxesValid = "SandboxesValid"
	// ConditionSandboxConnectionsValid: every Connection named by a
	// handler's sandbox.connectionRefs exists, is Ready and is allowed by the
	// handler's SandboxClass.
	ConditionSandboxConnectionsValid = "SandboxConnectionsValid"
)

// ToolRegistry condition reasons.
const (
	ReasonHandlersValid    = "HandlersValid"
	ReasonValidationFailed = "ValidationFailed"
	ReasonToolsDiscovered  = "ToolsDiscovered"

	// PolicyBound reasons.
	ReasonPolicyBound       = "PolicyBound"
	ReasonNoPolicy          = "NoMatchingPolicy"
	ReasonPolicyNotCompiled = "PolicyNotCompiled"

	// SandboxesValid reasons.
	ReasonNoSandboxes          = "NoSandboxes"
	ReasonSandboxesValid       = "SandboxesValid"
	ReasonSandboxClassNotFound = "SandboxClassNotFound"
	ReasonSandboxClassNotReady = "SandboxClassNotReady"

	// SandboxConnectionsValid reasons.
	ReasonNoConnections        = "NoConnections"
	ReasonConnectionsValid     = "ConnectionsValid"
	ReasonConnectionNotFound   = "ConnectionNotFound"
	ReasonConnectionNotReady   = "ConnectionNotReady"
	ReasonConnectionNotAllowed = "ConnectionNotAllowed"
)

// IsSelfDescribing reports whether handlers of this type learn their tools
// from the backend at run time (mcp, openapi). The controller lists a
// placeholder for them; every other type's tools are known from the spec.
func (t HandlerType) IsSelfDescribing() bool {
	return t == HandlerTypeMCP || t == HandlerTypeOpenAPI
}

// IsSelfDescribing reports whether the handler learns its tools from the
// backend at run time.
func (h *HandlerDefinition) IsSelfDescribing() bool { return h.Type.IsSelfDescribing() }

// HasExplicitTool reports whether the handler contributes the one tool
// declared in its tool field (http, grpc and client handlers).
func (h *HandlerDefinition) HasExplicitTool() bool {
	switch h.Type {
	case HandlerTypeHTTP, HandlerTypeGRPC, HandlerTypeClient:
		return true
	}
	return false
}

// EffectiveAuth is the handler's authentication with the deprecated
// authType/authSecretRef of httpConfig or openAPIConfig folded in: auth when
// set, otherwise the legacy fields (bearer when only a secret is named),
// otherwise nil (no authentication). The returned value is a copy.
func (h *HandlerDefinition) EffectiveAuth() *ToolAuth {
	if h.Auth != nil {
		return h.Auth.DeepCopy()
	}
	var legacyType *LegacyAuthType
	var legacyRef *SecretKeySelector
	switch {
	case h.HTTPConfig != nil && (h.HTTPConfig.AuthType != nil || h.HTTPConfig.AuthSecretRef != nil):
		legacyType, legacyRef = h.HTTPConfig.AuthType, h.HTTPConfig.AuthSecretRef
	case h.OpenAPIConfig != nil && (h.OpenAPIConfig.AuthType != nil || h.OpenAPIConfig.AuthSecretRef != nil):
		legacyType, legacyRef = h.OpenAPIConfig.AuthType, h.OpenAPIConfig.AuthSecretRef
	default:
		return nil
	}
	auth := &ToolAuth{Type: ToolAuthBearer}
	if legacyType != nil && *legacyType == LegacyAuthType(ToolAuthBasic) {
		auth.Type = ToolAuthBasic
	}
	if legacyRef != nil {
		key := legacyRef.Key
		auth.SecretRef = &SecretKeyRef{Name: legacyRef.Name, Key: &key}
	}
	return auth
}

// SandboxClassNames lists, without duplicates and in handler order, the
// SandboxClasses the registry's handlers name.
func (s *ToolRegistrySpec) SandboxClassNames() []string {
	var out []string
	seen := map[string]bool{}
	for i := range s.Handlers {
		sb := s.Handlers[i].Sandbox
		if sb != nil && !seen[sb.ClassName] {
			seen[sb.ClassName] = true
			out = append(out, sb.ClassName)
		}
	}
	return out
}

// ConnectionNames lists, without duplicates and in handler order, the
// Connections the registry's handlers name.
func (s *ToolRegistrySpec) ConnectionNames() []string {
	var out []string
	seen := map[string]bool{}
	for i := range s.Handlers {
		sb := s.Handlers[i].Sandbox
		if sb == nil {
			continue
		}
		for _, c := range sb.ConnectionRefs {
			if !seen[c.Name] {
				seen[c.Name] = true
				out = append(out, c.Name)
			}
		}
	}
	return out
}
