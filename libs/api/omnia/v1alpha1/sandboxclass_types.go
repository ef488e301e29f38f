package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxEgress is the outbound network policy of a sandbox.
// +kubebuilder:validation:Enum=none;connections;unrestricted
type SandboxEgress string

// Egress policies.
const (
	// SandboxEgressNone: no outbound traffic at all.
	SandboxEgressNone SandboxEgress = "none"
	// SandboxEgressConnections: outbound traffic only to the hosts of the
	// Connections a handler names (and this class allows).
	SandboxEgressConnections SandboxEgress = "connections"
	// SandboxEgressUnrestricted: any outbound traffic; Connections still
	// supply credentials.
	SandboxEgressUnrestricted SandboxEgress = "unrestricted"
)

// SandboxClassSpec is the desired state of a SandboxClass.
//
// +kubebuilder:validation:XValidation:rule="!has(self.network) || self.network.egress != 'none' || !has(self.allowedConnections) || size(self.allowedConnections) == 0",message="spec.allowedConnections must be empty when spec.network.egress is none"
type SandboxClassSpec struct {
	// image is the container image that hosts the sandboxed process; the
	// handler's command runs inside it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`

	// imagePullPolicy of the sandbox container. Defaults to IfNotPresent.
	// +optional
	// +kubebuilder:default=IfNotPresent
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// runtimeClassName selects a Kubernetes RuntimeClass for stronger
	// isolation (for example gVisor or Kata Containers). Empty uses the
	// cluster's default runtime.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`

	// resources of the sandbox container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// network is the sandbox's outbound network policy.
	// +optional
	Network *SandboxNetwork `json:"network,omitempty"`

	// allowedConnections are the Connections, in the same namespace, that
	// sandboxes of this class may use. A handler naming a Connection outside
	// this list fails the registry's SandboxConnectionsValid condition.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	AllowedConnections []LocalObjectReference `json:"allowedConnections,omitempty"`

	// maxLifetime ends a sandbox after this long, as a Go duration; a new
	// one is started on the next call. Defaults to 1h.
	// +optional
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	MaxLifetime *metav1.Duration `json:"maxLifetime,omitempty"`

	// idleTimeout ends a sandbox after this long without a call, as a Go
	// duration. Defaults to 10m.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`
}

// SandboxNetwork is a sandbox's outbound network policy.
type SandboxNetwork struct {
	// egress is none, connections (only the hosts of allowed Connections,
	// the default) or unrestricted.
	// +optional
	// +kubebuilder:default=connections
	// +kubebuilder:validation:MaxLength=16
	Egress SandboxEgress `json:"egress,omitempty"`
}

// SandboxClassPhase summarises a SandboxClass's state.
// +kubebuilder:validation:Enum=Pending;Ready;Failed
type SandboxClassPhase string

// SandboxClass phases.
const (
	SandboxClassPhasePending SandboxClassPhase = "Pending"
	SandboxClassPhaseReady   SandboxClassPhase = "Ready"
	SandboxClassPhaseFailed  SandboxClassPhase = "Failed"
)

// SandboxClass condition reasons (on the Ready condition).
const (
	// ReasonSandboxClassValid: the RuntimeClass and every allowed Connection
	// exist.
	ReasonSandboxClassValid = "Valid"
	// ReasonRuntimeClassNotFound: spec.runtimeClassName names no RuntimeClass.
	ReasonRuntimeClassNotFound = "RuntimeClassNotFound"
	// ReasonAllowedConnectionNotFound: an allowedConnections entry names no
	// Connection.
	ReasonAllowedConnectionNotFound = "ConnectionNotFound"
	// ReasonSandboxResourcesInvalid: spec.resources requests more of a
	// resource than it limits, which the API server refuses in any pod.
	ReasonSandboxResourcesInvalid = "ResourcesInvalid"
)

// SandboxClassStatus is the observed state of a SandboxClass.
type SandboxClassStatus struct {
	// phase is Pending, Ready or Failed.
	// +optional
	Phase SandboxClassPhase `json:"phase,omitempty"`

	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions detail the state; Ready says whether the class can run
	// sandboxes.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=sandboxclasses,singular=sandboxclass,shortName=sbc,scope=Namespaced,categories={omnia,agentplane}
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Runtime",type=string,JSONPath=`.spec.runtimeClassName`
// +kubebuilder:printcolumn:name="Egress",type=string,JSONPath=`.spec.network.egress`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// SandboxClass describes an isolated environment in which locally executed
// tools — stdio MCP servers and code tools — run instead of inside the agent
// runtime: the image, the container runtime, the resources, the outbound
// network policy and the Connections the sandbox may use. ToolRegistry
// handlers name it in sandbox.className.
type SandboxClass struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state of the SandboxClass.
	// +required
	Spec SandboxClassSpec `json:"spec"`

	// status is the observed state of the SandboxClass, written by its
	// controller.
	// +optional
	Status SandboxClassStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// SandboxClassList is a list of SandboxClasses.
type SandboxClassList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the SandboxClasses.
	Items []SandboxClass `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SandboxClass{}, &SandboxClassList{})
}

// AllowsConnection reports whether sandboxes of this class may use the
// named Connection: it must be listed in allowedConnections and egress must
// not be none.
func (s *SandboxClassSpec) AllowsConnection(name string) bool {
	if s.Network != nil && s.Network.Egress == SandboxEgressNone {
		return false
	}
	for _, c := range s.AllowedConnections {
		if c.Name == name {
			return true
		}
	}
	return false
}
