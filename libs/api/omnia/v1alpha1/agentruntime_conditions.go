package v1alpha1

// ConditionReady is the summary condition. On an AgentRuntime it is True
// when at least one replica is ready; ToolPolicy, SandboxClass and Connection
// use it for "usable".
const ConditionReady = "Ready"

// AgentRuntime condition types, set on AgentRuntime status.conditions.
const (
	// ConditionPromptPackReady: promptPackRef resolved to a usable PromptPack.
	ConditionPromptPackReady = "PromptPackReady"
	// ConditionToolRegistryReady: toolRegistryRef resolved. False does not
	// fail the agent; it runs without tools.
	ConditionToolRegistryReady = "ToolRegistryReady"
	// ConditionProviderReady: every providers entry resolved to a Ready
	// Provider of the expected role with the required capabilities.
	ConditionProviderReady = "ProviderReady"
	// ConditionFrameworkReady: a runtime image was found for the framework.
	ConditionFrameworkReady = "FrameworkReady"
	// ConditionDeploymentReady: the Deployment was written.
	ConditionDeploymentReady = "DeploymentReady"
	// ConditionServiceReady: the Service was written.
	ConditionServiceReady = "ServiceReady"
	// ConditionRolloutActive: a rollout is in progress.
	ConditionRolloutActive = "RolloutActive"
	// ConditionTrafficRouting: set False when the requested traffic routing
	// had to be degraded.
	ConditionTrafficRouting = "TrafficRouting"
	// ConditionAutoscalingReady: the autoscaler matches spec.
	ConditionAutoscalingReady = "AutoscalingReady"
	// ConditionCapabilitiesSatisfied: the runtime reports every capability
	// the spec needs.
	ConditionCapabilitiesSatisfied = "CapabilitiesSatisfied"
	// ConditionExternalAuth: how data-plane clients can authenticate.
	ConditionExternalAuth = "ExternalAuth"
	// ConditionOIDCJWKSReady: the OIDC issuer's key set is mirrored.
	ConditionOIDCJWKSReady = "OIDCJWKSReady"
	// ConditionPrivacyPolicyResolved: the session privacy policy resolved.
	ConditionPrivacyPolicyResolved = "PrivacyPolicyResolved"
	// ConditionIdle: True while the idle deadline has scaled the agent to
	// zero.
	ConditionIdle = "Idle"
	// ConditionPackContentValid is written by the runtime pod: the pack's
	// content passed the runtime's own checks.
	ConditionPackContentValid = "PackContentValid"
	// ConditionRuntimeCapabilitiesReported is written by the runtime pod
	// once it has reported status.runtimeCapabilities.
	ConditionRuntimeCapabilitiesReported = "RuntimeCapabilitiesReported"
)

// AgentRuntime condition reasons.
const (
	ReasonRuntimeReady    = "RuntimeReady"
	ReasonRuntimeNotReady = "RuntimeNotReady"

	ReasonPromptPackFound      = "PromptPackFound"
	ReasonPromptPackNotFound   = "PromptPackNotFound"
	ReasonPromptPackRefInvalid = "PromptPackRefInvalid"
	ReasonPromptPackInvalid    = "PromptPackInvalid"

	ReasonToolRegistryFound          = "ToolRegistryFound"
	ReasonToolRegistryNotFound       = "ToolRegistryNotFound"
	ReasonToolRegistryCrossNamespace = "ToolRegistryCrossNamespace"

	ReasonProviderFound      = "ProviderFound"
	ReasonProviderNotFound   = "ProviderNotFound"
	ReasonProviderNotReady   = "ProviderNotReady"
	ReasonRoleMismatch       = "RoleMismatch"
	ReasonCapabilityMismatch = "CapabilityMismatch"
	// ReasonProviderCrossNamespace: a providerRef names another namespace.
	ReasonProviderCrossNamespace = "ProviderCrossNamespace"

	ReasonFrameworkImageResolved    = "FrameworkImageResolved"
	ReasonFrameworkImageUnavailable = "FrameworkImageUnavailable"

	ReasonDeploymentCreated   = "DeploymentCreated"
	ReasonDeploymentFailed    = "DeploymentFailed"
	ReasonToolAuthUnsupported = "ToolAuthUnsupported"
	// ReasonVolumesInvalid: spec.runtime.volumes, spec.podOverrides.extraVolumes
	// or a mount naming them cannot go into a pod; the message names the
	// field.
	ReasonVolumesInvalid = "VolumesInvalid"

	ReasonServiceCreated = "ServiceCreated"
	ReasonServiceFailed  = "ServiceFailed"

	ReasonRolloutInProgress = "RolloutInProgress"
	ReasonAnalysisFailed    = "AnalysisFailed"
	ReasonPromoting         = "Promoting"
	ReasonNoActiveRollout   = "NoActiveRollout"
	// ReasonRolloutFailed: a step of the rollout engine failed (an API
	// error, a candidate Deployment the agent does not own); the message
	// says which, and the pass is retried with backoff.
	ReasonRolloutFailed = "RolloutFailed"

	ReasonDegraded = "Degraded"

	ReasonScaling          = "Scaling"
	ReasonDisabled         = "Disabled"
	ReasonAutoscalingError = "Error"
	// ReasonKEDANotInstalled: the agent asks for KEDA and the API server
	// serves no keda.sh/v1alpha1 ScaledObject.
	ReasonKEDANotInstalled = "KEDANotInstalled"
	// ReasonKEDANoTrigger: the agent asks for KEDA without triggers and the
	// operator has no Prometheus address for the default trigger.
	ReasonKEDANoTrigger = "NoTrigger"
	// ReasonAutoscalerNotOwned: a HorizontalPodAutoscaler of the agent's
	// name exists and is not controlled by the agent; it is left alone.
	ReasonAutoscalerNotOwned = "NotOwned"

	ReasonCapabilitiesSatisfied = "CapabilitiesSatisfied"
	ReasonCapabilitiesMissing   = "CapabilitiesMissing"
	ReasonCapabilitiesPending   = "CapabilitiesPending"

	ReasonDashboardOnly       = "DashboardOnly"
	ReasonDataPlaneConfigured = "DataPlaneConfigured"
	ReasonUnreachable         = "Unreachable"

	ReasonJWKSUpdated       = "JWKSUpdated"
	ReasonMissingIssuer     = "MissingIssuer"
	ReasonDiscoveryFailed   = "DiscoveryFailed"
	ReasonSecretWriteFailed = "SecretWriteFailed"

	ReasonWorkspaceDefault = "WorkspaceDefault"
	ReasonPolicyResolved   = "PolicyResolved"
	ReasonPolicyNotFound   = "PolicyNotFound"

	// ReasonIdleTimeoutExceeded: no session activity for spec.idleTimeout.
	ReasonIdleTimeoutExceeded = "IdleTimeoutExceeded"
	// ReasonActive: sessions are open or recent.
	ReasonActive = "Active"
	// ReasonWakeRequested: the wake annotation changed; replicas restored.
	ReasonWakeRequested = "WakeRequested"

	ReasonPackContentValid   = "PackContentValid"
	ReasonContentIssuesFound = "ContentIssuesFound"
	ReasonReported           = "Reported"
)

// Event reasons emitted by the AgentRuntime controller.
const (
	EventFrameworkImageUnavailable  = "FrameworkImageUnavailable"
	EventToolRegistryCrossNamespace = "ToolRegistryCrossNamespace"
	EventCapabilitiesMissing        = "CapabilitiesMissing"
	EventTrafficRoutingDegraded     = "TrafficRoutingDegraded"
	EventRolloutStep                = "RolloutStep"
	EventRolloutPromoting           = "RolloutPromoting"
	EventRolloutPromoted            = "RolloutPromoted"
	EventRolloutRolledBack          = "RolloutRolledBack"
	EventRolloutAnalysisPassed      = "RolloutAnalysisPassed"
	EventRolloutAnalysisFailed      = "RolloutAnalysisFailed"
	EventRolloutTriggered           = "RolloutTriggered"
	// EventRolloutFailed: the rollout engine failed; see RolloutActive.
	EventRolloutFailed = "RolloutFailed"
	// EventIdleReaped: the idle deadline passed and idleAction was applied.
	EventIdleReaped = "IdleReaped"
)

// EffectiveMode is spec.mode, agent when unset.
func (s *AgentRuntimeSpec) EffectiveMode() AgentMode {
	if s.Mode == "" {
		return AgentModeAgent
	}
	return s.Mode
}

// EffectiveIdleAction is spec.idleAction, scaleToZero when unset. It is
// meaningful only when spec.idleTimeout is set.
func (s *AgentRuntimeSpec) EffectiveIdleAction() IdleAction {
	if s.IdleAction == "" {
		return IdleScaleToZero
	}
	return s.IdleAction
}

// Channel is the channel a reference follows when it pins no version:
// track, stable when unset. It returns "" for a version pin.
func (r PromptPackRef) Channel() PromptPackChannel {
	switch {
	case r.Version != nil:
		return ""
	case r.Track != nil:
		return *r.Track
	}
	return ChannelStable
}

// EffectiveRole is the role expected of the Provider, llm when unset.
func (r NamedProviderRef) EffectiveRole() ProviderRole {
	if r.Role == "" {
		return ProviderRoleLLM
	}
	return r.Role
}

// PrimaryFacade is the facade whose port the Service exposes first:
// websocket, else rest, else a2a, else custom, else the first facade. It
// returns nil when there are no facades.
func (s *AgentRuntimeSpec) PrimaryFacade() *FacadeConfig {
	for _, t := range []FacadeType{FacadeTypeWebSocket, FacadeTypeREST, FacadeTypeA2A, FacadeTypeCustom} {
		for i := range s.Facades {
			if s.Facades[i].Type == t {
				return &s.Facades[i]
			}
		}
	}
	if len(s.Facades) > 0 {
		return &s.Facades[0]
	}
	return nil
}
