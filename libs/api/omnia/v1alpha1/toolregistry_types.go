package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ToolRegistrySpec is the desired state of a ToolRegistry.
type ToolRegistrySpec struct {
	// handlers are the tool handlers of the registry. Each handler is one
	// backend; its name is unique within the registry.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=128
	Handlers []HandlerDefinition `json:"handlers"`

	// probe turns on periodic TCP reachability checks of the handlers'
	// network endpoints. Off by default: without probing the registry is
	// Ready when its configuration is valid, whatever the backends' health.
	// +optional
	Probe *ProbeConfig `json:"probe,omitempty"`
}

// ProbeConfig configures endpoint probing.
type ProbeConfig struct {
	// enabled turns probing on. Unreachable endpoints make their tools
	// Unavailable and the registry Degraded (some) or Failed (all).
	// +required
	Enabled bool `json:"enabled"`

	// interval between two probe rounds, as a Go duration, at least 10s (a
	// round can write the status, which reaches every agent using the
	// registry). Defaults to 60s.
	// +optional
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="probe.interval must be at least 10s"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// timeout of one TCP connection attempt, as a Go duration. Defaults to 5s.
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// ToolStatus is the availability of one discovered tool.
// +kubebuilder:validation:Enum=Available;Unavailable;Unknown
type ToolStatus string

// Tool availability values.
const (
	ToolStatusAvailable   ToolStatus = "Available"
	ToolStatusUnavailable ToolStatus = "Unavailable"
	ToolStatusUnknown     ToolStatus = "Unknown"
)

// DiscoveredTool is one tool the registry offers, as found by the controller.
type DiscoveredTool struct {
	// name is the tool name shown to the model. For a self-describing handler
	// (mcp, openapi) it is a placeholder named after the handler; the real
	// tools are discovered by the runtime when it connects.
	Name string `json:"name"`

	// handlerName is the handler that provides the tool.
	HandlerName string `json:"handlerName"`

	// description of the tool, as shown to the model.
	// +optional
	Description string `json:"description,omitempty"`

	// inputSchema is the JSON Schema of the tool's arguments, when known.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	InputSchema *apiextensionsv1.JSON `json:"inputSchema,omitempty"`

	// outputSchema is the JSON Schema of the tool's result, when known.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	OutputSchema *apiextensionsv1.JSON `json:"outputSchema,omitempty"`

	// endpoint is the resolved address of the backend: a URL, host:port,
	// stdio://<command> for a local MCP server, client://browser for client
	// tools or platform://<service> for platform tools.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// status is Available, Unavailable (a probe failed) or Unknown.
	Status ToolStatus `json:"status"`

	// lastChecked is when the tool's availability was last judged.
	// +optional
	LastChecked *metav1.Time `json:"lastChecked,omitempty"`

	// error explains an Unavailable status.
	// +optional
	Error *string `json:"error,omitempty"`
}

// ToolRegistryPhase summarises a ToolRegistry's state.
// +kubebuilder:validation:Enum=Pending;Ready;Degraded;Failed
type ToolRegistryPhase string

// ToolRegistry phases.
const (
	// ToolRegistryPhasePending: not reconciled yet.
	ToolRegistryPhasePending ToolRegistryPhase = "Pending"
	// ToolRegistryPhaseReady: the handlers are valid and every tool is
	// available (or probing is off).
	ToolRegistryPhaseReady ToolRegistryPhase = "Ready"
	// ToolRegistryPhaseDegraded: probing found some endpoints unreachable.
	ToolRegistryPhaseDegraded ToolRegistryPhase = "Degraded"
	// ToolRegistryPhaseFailed: a handler is invalid, or no tool is available.
	ToolRegistryPhaseFailed ToolRegistryPhase = "Failed"
)

// ToolRegistryStatus is the observed state of a ToolRegistry.
type ToolRegistryStatus struct {
	// phase is Pending, Ready, Degraded or Failed.
	// +optional
	Phase ToolRegistryPhase `json:"phase,omitempty"`

	// discoveredToolsCount is the number of entries in discoveredTools.
	// +optional
	DiscoveredToolsCount int32 `json:"discoveredToolsCount,omitempty"`

	// discoveredTools are the tools the handlers provide.
	// +optional
	// +listType=atomic
	DiscoveredTools []DiscoveredTool `json:"discoveredTools,omitempty"`

	// lastDiscoveryTime is when discoveredTools was last computed.
	// +optional
	LastDiscoveryTime *metav1.Time `json:"lastDiscoveryTime,omitempty"`

	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions detail the state: HandlersValid, ToolsDiscovered,
	// PolicyBound, SandboxesValid and SandboxConnectionsValid.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=toolregistries,singular=toolregistry,shortName=tr,scope=Namespaced,categories={omnia,agentplane}
// +kubebuilder:printcolumn:name="Tools",type=integer,JSONPath=`.status.discoveredToolsCount`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ToolRegistry is a set of tool handlers an AgentRuntime can use. The
// controller validates the handlers, lists the tools they provide in
// status.discoveredTools and, when probing is on, checks their endpoints.
type ToolRegistry struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state of the ToolRegistry.
	// +required
	Spec ToolRegistrySpec `json:"spec"`

	// status is the observed state of the ToolRegistry, written by its
	// controller.
	// +optional
	Status ToolRegistryStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// ToolRegistryList is a list of ToolRegistries.
type ToolRegistryList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the ToolRegistries.
	Items []ToolRegistry `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ToolRegistry{}, &ToolRegistryList{})
}
