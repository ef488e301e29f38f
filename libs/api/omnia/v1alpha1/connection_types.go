package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CredentialInjection is how a Connection's credential reaches the traffic.
// +kubebuilder:validation:Enum=header;env
type CredentialInjection string

// Credential injection modes.
const (
	// InjectHeader: the platform's egress proxy adds the credential as a
	// request header, so the sandboxed process never sees it.
	InjectHeader CredentialInjection = "header"
	// InjectEnv: the credential is given to the sandboxed process as an
	// environment variable, for clients that must sign requests themselves.
	InjectEnv CredentialInjection = "env"
)

// ConnectionSpec is the desired state of a Connection.
type ConnectionSpec struct {
	// url is the base address of the endpoint, such as
	// "https://api.github.com". Its host is always reachable through the
	// Connection.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9+.-]*://[^\s/]+.*$`
	URL string `json:"url"`

	// allowedHosts are further hosts reachable through the Connection, as
	// exact names or "*.example.com" wildcards (for redirects and CDNs).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	AllowedHosts []string `json:"allowedHosts,omitempty"`

	// credential is added to the traffic of the Connection. Without it the
	// endpoint is reached anonymously.
	// +optional
	Credential *ConnectionCredential `json:"credential,omitempty"`

	// description says what the endpoint is, for people choosing it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`
}

// ConnectionCredential is a secret added to a Connection's traffic.
//
// +kubebuilder:validation:XValidation:rule="self.injectAs != 'env' || (has(self.envVar) && size(self.envVar) > 0)",message="credential.envVar is required when credential.injectAs is env",fieldPath=".envVar",reason=FieldValueRequired
type ConnectionCredential struct {
	// secretRef names the Secret holding the credential; without a key,
	// "token" is read.
	// +required
	SecretRef SecretKeyRef `json:"secretRef"`

	// injectAs is header (added by the egress proxy, the default) or env
	// (handed to the sandboxed process).
	// +optional
	// +kubebuilder:default=header
	// +kubebuilder:validation:MaxLength=16
	InjectAs CredentialInjection `json:"injectAs,omitempty"`

	// header that carries the credential when injectAs is header. Defaults
	// to Authorization.
	// +optional
	// +kubebuilder:default=Authorization
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Header string `json:"header,omitempty"`

	// prefix is put before the secret value in the header, such as
	// "Bearer " (the default when header is Authorization and prefix is
	// unset).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Prefix *string `json:"prefix,omitempty"`

	// envVar is the environment variable that carries the credential when
	// injectAs is env.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	EnvVar string `json:"envVar,omitempty"`
}

// ConnectionPhase summarises a Connection's state.
// +kubebuilder:validation:Enum=Pending;Ready;Failed
type ConnectionPhase string

// Connection phases.
const (
	ConnectionPhasePending ConnectionPhase = "Pending"
	ConnectionPhaseReady   ConnectionPhase = "Ready"
	ConnectionPhaseFailed  ConnectionPhase = "Failed"
)

// Connection condition reasons (on the Ready condition). SecretNotFound and
// SecretKeyMissing are shared with Provider.
const (
	// ReasonCredentialResolved: the credential's Secret and key exist.
	ReasonCredentialResolved = "CredentialResolved"
	// ReasonNoCredential: the Connection is anonymous.
	ReasonNoCredential = "NoCredential"
)

// ConnectionStatus is the observed state of a Connection.
type ConnectionStatus struct {
	// phase is Pending, Ready or Failed.
	// +optional
	Phase ConnectionPhase `json:"phase,omitempty"`

	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions detail the state; Ready says whether the credential
	// resolves.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=connections,singular=connection,shortName=conn,scope=Namespaced,categories={omnia,agentplane}
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Connection is an outbound endpoint a sandbox may reach — its URL, the
// extra hosts that belong to it and the credential added to its traffic.
// SandboxClasses allow Connections, and ToolRegistry handlers name the ones
// their sandboxed process uses.
type Connection struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state of the Connection.
	// +required
	Spec ConnectionSpec `json:"spec"`

	// status is the observed state of the Connection, written by its
	// controller.
	// +optional
	Status ConnectionStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// ConnectionList is a list of Connections.
type ConnectionList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the Connections.
	Items []Connection `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Connection{}, &ConnectionList{})
}
