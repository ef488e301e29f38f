package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultServiceGroup is the service group an AgentRuntime uses when its
// spec.serviceGroup is empty.
const DefaultServiceGroup = "default"

// WorkspaceSpec is the desired state of a Workspace.
type WorkspaceSpec struct {
	// namespace is the namespace the Workspace owns. The controller creates
	// it when it is missing and labels it with the Workspace's name; it never
	// deletes a namespace, not even when the Workspace is deleted or moves to
	// another namespace (the namespace holds the tenant's objects).
	// +required
	Namespace WorkspaceNamespace `json:"namespace"`

	// services are the service groups of the Workspace. An AgentRuntime of
	// the namespace picks one with spec.serviceGroup ("default" when unset)
	// and inherits its defaults.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Services []WorkspaceServiceGroup `json:"services,omitempty"`

	// runtime holds pod defaults for every agent of the namespace; an
	// agent's own spec.podOverrides win over them.
	// +optional
	Runtime *WorkspaceRuntime `json:"runtime,omitempty"`
}

// WorkspaceNamespace names the namespace a Workspace owns.
type WorkspaceNamespace struct {
	// name of the namespace, a DNS label. It may be changed: the controller
	// then claims the new namespace and removes its label from the old one.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
}

// WorkspaceServiceGroup is a named set of defaults for the agents that
// select it.
type WorkspaceServiceGroup struct {
	// name of the group, unique within the Workspace; agents select it with
	// spec.serviceGroup.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// autoscaling is the default autoscaling of the group's agents. An
	// agent that sets spec.runtime.autoscaling uses its own instead, as a
	// whole: the two are never merged field by field.
	// +optional
	Autoscaling *AutoscalingConfig `json:"autoscaling,omitempty"`
}

// WorkspaceRuntime are pod defaults for the agents of a Workspace's
// namespace.
type WorkspaceRuntime struct {
	// serviceAccountName of the agent pods, unless an agent's
	// spec.podOverrides.serviceAccountName names another.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// podLabels added to the agent pods. An agent's own
	// spec.podOverrides.labels win on the same key, and the selector labels
	// the operator sets cannot be overridden.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	PodLabels map[string]string `json:"podLabels,omitempty"`

	// podAnnotations added to the agent pods. An agent's own annotations
	// (spec.extraPodAnnotations, spec.podOverrides.annotations) win on the
	// same key.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
}

// WorkspacePhase summarises a Workspace's state.
// +kubebuilder:validation:Enum=Pending;Ready;Failed
type WorkspacePhase string

// Workspace phases.
const (
	// WorkspacePhasePending: not reconciled yet, or its namespace is being
	// deleted and is claimed again once it is gone.
	WorkspacePhasePending WorkspacePhase = "Pending"
	// WorkspacePhaseReady: the namespace exists and carries the
	// Workspace's label.
	WorkspacePhaseReady WorkspacePhase = "Ready"
	// WorkspacePhaseFailed: another Workspace owns the namespace; an edit
	// of either Workspace resolves it.
	WorkspacePhaseFailed WorkspacePhase = "Failed"
)

// WorkspaceStatus is the observed state of a Workspace.
type WorkspaceStatus struct {
	// phase is Pending, Ready or Failed.
	// +optional
	Phase WorkspacePhase `json:"phase,omitempty"`

	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions detail the state; NamespaceReady says whether the
	// Workspace owns its namespace.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=workspaces,singular=workspace,shortName=ws,scope=Cluster,categories={omnia,agentplane}
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.namespace.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Workspace is a tenant: it owns one namespace and carries the defaults
// (service account, pod labels and annotations, per-group autoscaling) the
// AgentRuntimes of that namespace inherit. The controller creates the
// namespace when it is missing and marks it with the
// omnia.altairalabs.ai/workspace label.
type Workspace struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state of the Workspace.
	// +required
	Spec WorkspaceSpec `json:"spec"`

	// status is the observed state of the Workspace, written by its
	// controller.
	// +optional
	Status WorkspaceStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// WorkspaceList is a list of Workspaces.
type WorkspaceList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the Workspaces.
	Items []Workspace `json:"items"`
}

// ServiceGroup returns the service group named name, or nil.
func (s *WorkspaceSpec) ServiceGroup(name string) *WorkspaceServiceGroup {
	for i := range s.Services {
		if s.Services[i].Name == name {
			return &s.Services[i]
		}
	}
	return nil
}

func init() {
	SchemeBuilder.Register(&Workspace{}, &WorkspaceList{})
}
