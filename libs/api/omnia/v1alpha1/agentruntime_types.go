package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentMode is how an agent is used.
// +kubebuilder:validation:Enum=agent;function
type AgentMode string

// Agent modes.
const (
	// AgentModeAgent: a conversational agent reached over websocket, A2A or a
	// custom facade.
	AgentModeAgent AgentMode = "agent"
	// AgentModeFunction: a stateless function with typed input and output,
	// reached over one REST facade (and optionally MCP).
	AgentModeFunction AgentMode = "function"
)

// OutputFormat is the shape of a function-mode agent's output.
// +kubebuilder:validation:Enum=text;json;json_schema
type OutputFormat string

// IdleAction is what happens to an AgentRuntime that stays idle past its
// idle timeout.
// +kubebuilder:validation:Enum=scaleToZero;delete
type IdleAction string

// Idle actions.
const (
	// IdleScaleToZero scales the agent's Deployment to zero replicas and keeps
	// the AgentRuntime; it wakes when its spec changes or when the
	// omnia.altairalabs.ai/wake-requested-at annotation changes.
	IdleScaleToZero IdleAction = "scaleToZero"
	// IdleDelete deletes the AgentRuntime (and with it everything it owns).
	IdleDelete IdleAction = "delete"
)

// AgentRuntimeSpec is the desired state of an AgentRuntime.
//
// +kubebuilder:validation:XValidation:rule="self.mode != 'function' || has(self.inputSchema)",message="spec.inputSchema is required when spec.mode is function"
// +kubebuilder:validation:XValidation:rule="self.mode != 'function' || has(self.outputSchema)",message="spec.outputSchema is required when spec.mode is function"
// +kubebuilder:validation:XValidation:rule="self.mode == 'function' || !has(self.inputSchema)",message="spec.inputSchema may only be set when spec.mode is function"
// +kubebuilder:validation:XValidation:rule="self.mode == 'function' || !has(self.outputSchema)",message="spec.outputSchema may only be set when spec.mode is function"
// +kubebuilder:validation:XValidation:rule="self.mode == 'function' || !has(self.outputFormat)",message="spec.outputFormat may only be set when spec.mode is function"
// +kubebuilder:validation:XValidation:rule="!has(self.facades) || self.facades.all(f, self.facades.exists_one(g, g.type == f.type))",message="spec.facades must not list a facade type twice"
// +kubebuilder:validation:XValidation:rule="!has(self.facades) || self.mode != 'agent' || self.facades.all(f, f.type in ['websocket', 'a2a', 'custom'])",message="spec.facades: mode agent accepts only websocket, a2a and custom facades"
// +kubebuilder:validation:XValidation:rule="!has(self.facades) || self.mode != 'function' || self.facades.all(f, f.type in ['rest', 'mcp'])",message="spec.facades: mode function accepts only rest and mcp facades"
// +kubebuilder:validation:XValidation:rule="!has(self.facades) || self.mode != 'function' || self.facades.exists_one(f, f.type == 'rest')",message="spec.facades: mode function needs exactly one rest facade"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.trigger) || (has(self.promptPackRef.version) && !has(self.promptPackRef.track))",message="spec.rollout.trigger needs spec.promptPackRef.version set and spec.promptPackRef.track unset"
// +kubebuilder:validation:XValidation:rule="!has(self.idleAction) || has(self.idleTimeout)",message="spec.idleAction needs spec.idleTimeout"
// +kubebuilder:validation:XValidation:rule="!has(self.idleTimeout) || (has(self.idleAction) && self.idleAction == 'delete') || !has(self.runtime) || !has(self.runtime.autoscaling) || !(has(self.runtime.autoscaling.enabled) && self.runtime.autoscaling.enabled)",message="spec.idleTimeout scales to zero and cannot be combined with spec.runtime.autoscaling.enabled; use idleAction delete, or autoscaling type keda with minReplicas 0"
type AgentRuntimeSpec struct {
	// mode is agent (a conversational agent, the default) or function (a
	// stateless call with inputSchema and outputSchema behind a REST facade).
	// +optional
	// +kubebuilder:default=agent
	// +kubebuilder:validation:MaxLength=16
	Mode AgentMode `json:"mode,omitempty"`

	// inputSchema is the JSON Schema of a function's input; required in
	// function mode, forbidden otherwise.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	InputSchema *apiextensionsv1.JSON `json:"inputSchema,omitempty"`

	// outputSchema is the JSON Schema of a function's output; required in
	// function mode, forbidden otherwise.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	OutputSchema *apiextensionsv1.JSON `json:"outputSchema,omitempty"`

	// outputFormat of a function's output: text, json or json_schema (what
	// the runtime uses when unset). Function mode only.
	// +optional
	OutputFormat OutputFormat `json:"outputFormat,omitempty"`

	// framework is the agent framework the runtime container runs.
	// Defaults to PromptKit with the operator's image.
	// +optional
	Framework *FrameworkConfig `json:"framework,omitempty"`

	// promptPackRef selects the PromptPack the agent serves: by pack name,
	// then either an exact version or a channel to follow.
	// +required
	PromptPackRef PromptPackRef `json:"promptPackRef"`

	// facades are the protocols clients use to reach the agent (one per
	// type). Mode agent accepts websocket, a2a and custom; mode function
	// needs one rest facade and accepts mcp.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	Facades []FacadeConfig `json:"facades"`

	// toolRegistryRef selects the ToolRegistry whose tools the agent may
	// call. Optional: a missing registry does not fail the agent, which then
	// runs without tools. It must be in the agent's namespace.
	// +optional
	ToolRegistryRef *ToolRegistryRef `json:"toolRegistryRef,omitempty"`

	// providers are the model endpoints the agent uses, each under a logical
	// name ("default", "judge", "embeddings") with the role and capabilities
	// it expects of the Provider.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Providers []NamedProviderRef `json:"providers,omitempty"`

	// context is where conversation state is kept between turns.
	// +optional
	Context *ContextConfig `json:"context,omitempty"`

	// runtime shapes the Deployment: replicas, autoscaling, resources and
	// scheduling.
	// +optional
	Runtime *RuntimeConfig `json:"runtime,omitempty"`

	// media configures where uploaded and generated media are stored.
	// +optional
	Media *MediaConfig `json:"media,omitempty"`

	// evals configures quality evaluations of the agent's sessions.
	// +optional
	Evals *EvalConfig `json:"evals,omitempty"`

	// console configures the dashboard's chat console for this agent.
	// +optional
	Console *ConsoleConfig `json:"console,omitempty"`

	// duplex turns on full-duplex (voice) sessions.
	// +optional
	Duplex *DuplexConfig `json:"duplex,omitempty"`

	// externalAuth configures how data-plane clients authenticate to the
	// facades. Without it only the management plane can reach the agent.
	// +optional
	ExternalAuth *ExternalAuthConfig `json:"externalAuth,omitempty"`

	// memory configures long-term memory across sessions.
	// +optional
	Memory *MemoryConfig `json:"memory,omitempty"`

	// extraPodAnnotations are added to the agent pods' annotations.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	ExtraPodAnnotations map[string]string `json:"extraPodAnnotations,omitempty"`

	// serviceGroup selects the service group of the namespace's Workspace
	// whose defaults (such as autoscaling) apply. Defaults to "default".
	// +optional
	// +kubebuilder:default=default
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ServiceGroup string `json:"serviceGroup,omitempty"`

	// privacyPolicyRef names a SessionPrivacyPolicy in the same namespace;
	// when unset the Workspace default applies.
	// +optional
	PrivacyPolicyRef *LocalObjectReference `json:"privacyPolicyRef,omitempty"`

	// rollout moves the agent to a candidate configuration step by step
	// (canary, blue-green, experiments).
	// +optional
	Rollout *RolloutConfig `json:"rollout,omitempty"`

	// podOverrides adjust the agent pods: service account, labels,
	// scheduling, pull secrets, extra environment and volumes.
	// +optional
	PodOverrides *PodOverrides `json:"podOverrides,omitempty"`

	// idleTimeout makes the AgentRuntime reapable: once no session is active
	// and none has started or ended for this long (a Go duration such as
	// "30m"), idleAction is applied. Each pod's facade reports its
	// sessions in status.facadeReports, which the controller sums into
	// status.activeSessions and status.lastActivityTime. Unset means the
	// agent is never reaped.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`

	// idleAction is what reaping does: scaleToZero (the default) scales the
	// Deployment to zero until the spec or the
	// omnia.altairalabs.ai/wake-requested-at annotation changes; delete
	// deletes the AgentRuntime. Requires idleTimeout.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	IdleAction IdleAction `json:"idleAction,omitempty"`
}

// PromptPackRef selects a PromptPack by pack name and version or channel.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.version) && has(self.track))",message="promptPackRef: set version or track, not both"
type PromptPackRef struct {
	// name is the pack name: spec.packName of the PromptPacks (not an object
	// name).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// version pins one PromptPack version; versions are compared by semver
	// precedence, so "v1.5.0" matches "1.5.0". Mutually exclusive with
	// track.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^v?(0|[1-9][0-9]{0,17})\.(0|[1-9][0-9]{0,17})\.(0|[1-9][0-9]{0,17})(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`
	Version *string `json:"version,omitempty"`

	// track follows the highest Active version of a channel: stable or
	// prerelease. When neither version nor track is set, the stable channel
	// is followed. Mutually exclusive with version.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Track *PromptPackChannel `json:"track,omitempty"`
}

// ToolRegistryRef selects a ToolRegistry.
type ToolRegistryRef struct {
	// name of the ToolRegistry.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// namespace of the ToolRegistry; defaults to the agent's namespace. A
	// different namespace is refused by the controller (ToolRegistryReady
	// False, ToolRegistryCrossNamespace), because ToolPolicies bind to
	// registries of their own namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace *string `json:"namespace,omitempty"`
}

// ProviderRef selects a Provider.
type ProviderRef struct {
	// name of the Provider.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// namespace of the Provider; defaults to the agent's namespace. A
	// different namespace fails the agent.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace *string `json:"namespace,omitempty"`
}

// NamedProviderRef binds a Provider under a logical name.
type NamedProviderRef struct {
	// name is the logical name the runtime looks the Provider up by, such as
	// "default", "judge" or "embeddings".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// providerRef selects the Provider.
	// +required
	ProviderRef ProviderRef `json:"providerRef"`

	// role the Provider must have (spec.role); a mismatch fails the agent.
	// Defaults to llm.
	// +optional
	// +kubebuilder:default=llm
	Role ProviderRole `json:"role,omitempty"`

	// requiredCapabilities the Provider must list in spec.capabilities; a
	// missing one keeps the agent Pending.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	RequiredCapabilities []ProviderCapability `json:"requiredCapabilities,omitempty"`
}

// AgentRuntimePhase summarises an AgentRuntime's state.
// +kubebuilder:validation:Enum=Pending;Running;Failed
type AgentRuntimePhase string

// AgentRuntime phases.
const (
	// AgentRuntimePhasePending: waiting — for a Provider to become Ready or
	// gain a capability, or for the first ready replica (also while scaled
	// to zero by the idle deadline).
	AgentRuntimePhasePending AgentRuntimePhase = "Pending"
	// AgentRuntimePhaseRunning: at least one replica is ready.
	AgentRuntimePhaseRunning AgentRuntimePhase = "Running"
	// AgentRuntimePhaseFailed: a reference cannot be resolved or is invalid;
	// see the conditions. Not necessarily permanent.
	AgentRuntimePhaseFailed AgentRuntimePhase = "Failed"
)

// ReplicaStatus counts the stable Deployment's replicas.
type ReplicaStatus struct {
	// desired replicas.
	Desired int32 `json:"desired"`
	// ready replicas.
	Ready int32 `json:"ready"`
	// available replicas.
	Available int32 `json:"available"`
}

// ManagementEndpoints are the Service ports of the management-plane twins
// of the facades.
type ManagementEndpoints struct {
	// ws is the management port of the websocket facade.
	// +optional
	WS *int32 `json:"ws,omitempty"`
	// a2a is the management port of the A2A facade.
	// +optional
	A2A *int32 `json:"a2a,omitempty"`
	// mcp is the management port of the MCP facade.
	// +optional
	MCP *int32 `json:"mcp,omitempty"`
}

// FacadeReport is one pod's session report: what its facade holds open
// and when a session there last started or ended.
type FacadeReport struct {
	// pod is the name of the reporting pod (the facade's POD_NAME).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Pod string `json:"pod"`

	// activeSessions is the number of sessions open on the pod.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	ActiveSessions int32 `json:"activeSessions"`

	// lastActivityTime is when a session on the pod last started or ended
	// (or, while sessions are open, the pod's latest heartbeat).
	// +optional
	LastActivityTime *metav1.Time `json:"lastActivityTime,omitempty"`
}

// AgentRuntimeStatus is the observed state of an AgentRuntime.
type AgentRuntimeStatus struct {
	// phase is Pending, Running or Failed.
	// +optional
	Phase AgentRuntimePhase `json:"phase,omitempty"`

	// replicas of the stable Deployment.
	// +optional
	Replicas *ReplicaStatus `json:"replicas,omitempty"`

	// activeVersion is the PromptPack version the stable Deployment serves.
	// +optional
	ActiveVersion *string `json:"activeVersion,omitempty"`

	// serviceEndpoint is the in-cluster address of the primary facade,
	// <name>.<namespace>.svc.cluster.local:<port>.
	// +optional
	ServiceEndpoint string `json:"serviceEndpoint,omitempty"`

	// managementEndpoints are the management-plane ports of the Service.
	// +optional
	ManagementEndpoints *ManagementEndpoints `json:"managementEndpoints,omitempty"`

	// a2a reports the A2A facade's agent card and its resolved clients.
	// +optional
	A2A *A2AStatus `json:"a2a,omitempty"`

	// facade reports externally exposed facade endpoints.
	// +optional
	Facade *FacadeStatus `json:"facade,omitempty"`

	// rollout reports the progress of spec.rollout.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// runtimeCapabilities are the capabilities the runtime reports it
	// supports (written by the runtime pod).
	// +optional
	// +listType=set
	RuntimeCapabilities []string `json:"runtimeCapabilities,omitempty"`

	// facadeReports are the session reports of the agent's pods, one entry
	// per pod, each written by that pod's facade (server-side apply with
	// field manager omnia-facade/<pod>), so replicas never overwrite each
	// other's counts. The controller removes the entries of pods that no
	// longer exist.
	// +optional
	// +listType=map
	// +listMapKey=pod
	// +kubebuilder:validation:MaxItems=512
	FacadeReports []FacadeReport `json:"facadeReports,omitempty"`

	// activeSessions is the number of open sessions: the sum over the
	// facadeReports of the agent's existing pods, written by the
	// controller. The idle deadline only runs while it is zero.
	// +optional
	ActiveSessions *int32 `json:"activeSessions,omitempty"`

	// lastActivityTime is when a session last started or ended: the latest
	// of its previous value and the facadeReports' times, written by the
	// controller. The idle deadline is lastActivityTime + spec.idleTimeout
	// (or, before any activity, the time the agent first became Running).
	// +optional
	LastActivityTime *metav1.Time `json:"lastActivityTime,omitempty"`

	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions detail the state; see the Condition* constants for types
	// and reasons.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=agentruntimes,singular=agentruntime,shortName=ar,scope=Namespaced,categories={omnia,agentplane}
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.replicas.ready`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.activeVersion`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// AgentRuntime is a long-lived AI assistant. It binds a PromptPack, one or
// more Providers and optionally a ToolRegistry, and the controller turns it
// into a Deployment and a Service once every reference is usable.
type AgentRuntime struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state of the AgentRuntime.
	// +required
	Spec AgentRuntimeSpec `json:"spec"`

	// status is the observed state of the AgentRuntime, written by its
	// controller and, for a few fields, by the runtime pods.
	// +optional
	Status AgentRuntimeStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// AgentRuntimeList is a list of AgentRuntimes.
type AgentRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the AgentRuntimes.
	Items []AgentRuntime `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AgentRuntime{}, &AgentRuntimeList{})
}
