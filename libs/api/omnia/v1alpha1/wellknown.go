package v1alpha1

// Labels, annotations and finalizers the Omnia controllers read and write.
// Their values are part of the contract with existing manifests, the
// runtime images and the dashboards, so they must not change.
const (
	// LabelPromptPack carries spec.packName on every PromptPack. The
	// PromptPack controller stamps it, and sibling versions of a pack and the
	// AgentRuntimes that follow it are found through it.
	LabelPromptPack = "omnia.altairalabs.ai/promptpack"

	// LabelWorkspace marks a namespace as owned by the named Workspace.
	LabelWorkspace = "omnia.altairalabs.ai/workspace"

	// LabelType with the value LabelTypeCredentials marks a Secret that holds
	// Provider credentials. It is an opt-in: the controllers see no other
	// Secret of a tenant, so a Provider's secretRef or
	// auth.credentialsSecretRef must name a Secret carrying it.
	LabelType = "omnia.altairalabs.ai/type"
	// LabelTypeCredentials is the LabelType value of credential Secrets.
	LabelTypeCredentials = "credentials"
	// LabelTypeOIDCJWKS is the LabelType value of the OIDC key-set mirrors
	// the AgentRuntime controller writes.
	LabelTypeOIDCJWKS = "oidc-jwks"

	// LabelComponent tells which part of an agent an object belongs to;
	// agent pods carry ComponentAgent.
	LabelComponent = "omnia.altairalabs.ai/component"
	// ComponentAgent is the LabelComponent value of agent pods.
	ComponentAgent = "agent"
	// ComponentToolsConfig is the LabelComponent value of the tools ConfigMap.
	ComponentToolsConfig = "tools-config"

	// LabelTrack separates the stable and the candidate pods of a rollout.
	LabelTrack = "omnia.altairalabs.ai/track"
	// TrackStable is the LabelTrack value of the stable Deployment's pods.
	TrackStable = "stable"
	// TrackCanary is the LabelTrack value of the candidate Deployment's pods.
	TrackCanary = "canary"

	// LabelMode carries an agent's spec.mode on its pods.
	LabelMode = "omnia.altairalabs.ai/mode"

	// LabelCredentialKind marks Secrets the operator writes itself, such as
	// the mirrored OIDC key set (CredentialKindOIDCJWKS).
	LabelCredentialKind = "omnia.altairalabs.ai/credential-kind"
	// CredentialKindOIDCJWKS is the LabelCredentialKind value of JWKS mirrors.
	CredentialKindOIDCJWKS = "agent-oidc-jwks"

	// LabelManagedBy marks ConfigMaps and PromptPacks materialised by a
	// source controller rather than written by hand.
	LabelManagedBy = "omnia.altairalabs.ai/managed-by"

	// AnnotationConfigHash on an agent's pod template changes whenever an
	// input of the pod (pack, registry, providers, credentials) changes, so
	// the Deployment rolls.
	AnnotationConfigHash = "omnia.altairalabs.ai/config-hash"

	// AnnotationMockProvider set to "true" on an AgentRuntime makes its
	// runtime answer with the mock provider.
	AnnotationMockProvider = "omnia.altairalabs.ai/mock-provider"

	// AnnotationLastRolledBackVersion records the candidate PromptPack
	// version of the last automatic rollback, so a version trigger does not
	// canary that version again.
	AnnotationLastRolledBackVersion = "omnia.altairalabs.ai/last-rolled-back-version"

	// AnnotationOIDCJWKSFetchedAt is the RFC 3339 time the JWKS mirror Secret
	// was last fetched from the issuer.
	AnnotationOIDCJWKSFetchedAt = "omnia.altairalabs.ai/oidc-jwks-fetched-at"

	// AnnotationWakeRequestedAt, set or changed on an AgentRuntime that its
	// idle deadline scaled to zero, brings it back to its configured
	// replicas. Its value is informational (an RFC 3339 time by convention);
	// the change itself is the signal.
	AnnotationWakeRequestedAt = "omnia.altairalabs.ai/wake-requested-at"

	// AgentRuntimeFinalizer is held by the AgentRuntime controller on every
	// AgentRuntime it has reconciled.
	AgentRuntimeFinalizer = "agentruntime.omnia.altairalabs.ai/finalizer"

	// PackJSONKey is the ConfigMap key that holds a PromptPack's content.
	PackJSONKey = "pack.json"
)
