package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SessionRetentionPolicySpec is the desired state of a
// SessionRetentionPolicy.
//
// +kubebuilder:validation:XValidation:rule="!has(self.transcriptTTL) || duration(self.transcriptTTL) <= duration(self.sessionTTL)",message="transcriptTTL must not be longer than sessionTTL",fieldPath=".transcriptTTL",reason=FieldValueInvalid
type SessionRetentionPolicySpec struct {
	// agentSelector selects the AgentRuntimes of the namespace the policy
	// governs; empty or unset selects all of them.
	// +optional
	AgentSelector *metav1.LabelSelector `json:"agentSelector,omitempty"`

	// sessionTTL is how long a session's records are kept after its last
	// activity, as a Go duration such as 720h; at least one minute.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="sessionTTL must be at least 1m"
	SessionTTL metav1.Duration `json:"sessionTTL"`

	// transcriptTTL is how long the message transcript of a session is kept,
	// when it should go before the rest of the session's records; never
	// longer than sessionTTL. Unset: as long as sessionTTL.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="transcriptTTL must be at least 1m"
	TranscriptTTL *metav1.Duration `json:"transcriptTTL,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=sessionretentionpolicies,singular=sessionretentionpolicy,shortName=srp,scope=Namespaced,categories={omnia,agentplane}
// +kubebuilder:printcolumn:name="Session TTL",type=string,JSONPath=`.spec.sessionTTL`
// +kubebuilder:printcolumn:name="Agents",type=integer,JSONPath=`.status.agentCount`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Conflict",type=string,JSONPath=`.status.conditions[?(@.type=="Conflict")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// SessionRetentionPolicy says how long the session records of the
// AgentRuntimes it selects are kept. Where two policies select one agent,
// the older is in force.
type SessionRetentionPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state of the SessionRetentionPolicy.
	// +required
	Spec SessionRetentionPolicySpec `json:"spec"`

	// status is the observed state, written by its controller.
	// +optional
	Status AgentPolicyStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// SessionRetentionPolicyList is a list of SessionRetentionPolicies.
type SessionRetentionPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the SessionRetentionPolicies.
	Items []SessionRetentionPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SessionRetentionPolicy{}, &SessionRetentionPolicyList{})
}
