package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Memory retrieval strategies, the values of MemoryStrategy.
const (
	// MemoryKeyword matches the words of the turn.
	MemoryKeyword MemoryStrategy = "keyword"
	// MemorySemantic ranks memories by embedding similarity.
	MemorySemantic MemoryStrategy = "semantic"
	// MemoryComposite merges the keyword and semantic rankings.
	MemoryComposite MemoryStrategy = "composite"
)

// PIICategory is a kind of personal data with a built-in detector.
// +kubebuilder:validation:Enum=email;phone;creditCard;ipAddress;ssn
type PIICategory string

// PII categories.
const (
	PIIEmail      PIICategory = "email"
	PIIPhone      PIICategory = "phone"
	PIICreditCard PIICategory = "creditCard"
	PIIIPAddress  PIICategory = "ipAddress"
	PIISSN        PIICategory = "ssn"
)

// MemoryPolicy condition reasons (on Ready), besides those shared with
// SessionRetentionPolicy.
const (
	// ReasonInvalidRedaction: a spec.redact[].pattern does not compile as
	// an RE2 regular expression; the policy is in force for no agent.
	ReasonInvalidRedaction = "InvalidRedaction"
)

// MemoryRetention bounds how long a memory is kept.
type MemoryRetention struct {
	// ttl is how long a memory is kept after it was last written, as a Go
	// duration such as 2160h; at least one minute.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="retention.ttl must be at least 1m"
	TTL metav1.Duration `json:"ttl"`
}

// MemoryPolicyRetrieval is how memories are brought into a turn.
type MemoryPolicyRetrieval struct {
	// strategy is keyword, semantic or composite (the default).
	// +optional
	// +kubebuilder:default=composite
	Strategy MemoryStrategy `json:"strategy,omitempty"`

	// limit is how many memories a turn receives at most, 1 to 50.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	Limit int32 `json:"limit,omitempty"`
}

// RedactionRule names personal data to remove before a memory is stored:
// a built-in category or an RE2 regular expression, exactly one.
//
// +kubebuilder:validation:XValidation:rule="has(self.category) != has(self.pattern)",message="redact: set exactly one of category and pattern"
type RedactionRule struct {
	// category is a built-in detector: email, phone, creditCard, ipAddress
	// or ssn.
	// +optional
	Category PIICategory `json:"category,omitempty"`

	// pattern is an RE2 regular expression (Go's regexp syntax); each match
	// is redacted. The controller compiles it and names a bad one on Ready.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Pattern string `json:"pattern,omitempty"`
}

// MemoryPolicySpec is the desired state of a MemoryPolicy.
type MemoryPolicySpec struct {
	// agentSelector selects the AgentRuntimes of the namespace the policy
	// governs; empty or unset selects all of them.
	// +optional
	AgentSelector *metav1.LabelSelector `json:"agentSelector,omitempty"`

	// retention bounds how long memories are kept; unset keeps them until
	// deleted.
	// +optional
	Retention *MemoryRetention `json:"retention,omitempty"`

	// maxEntriesPerUser caps the memories kept per end user; the oldest go
	// first. Unset: no cap.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MaxEntriesPerUser *int32 `json:"maxEntriesPerUser,omitempty"`

	// retrieval is how memories are brought into a turn.
	// +optional
	Retrieval *MemoryPolicyRetrieval `json:"retrieval,omitempty"`

	// redact lists the personal data removed before a memory is stored.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Redact []RedactionRule `json:"redact,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=memorypolicies,singular=memorypolicy,shortName=mempol,scope=Namespaced,categories={omnia,agentplane}
// +kubebuilder:printcolumn:name="Retention",type=string,JSONPath=`.spec.retention.ttl`
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.retrieval.strategy`
// +kubebuilder:printcolumn:name="Agents",type=integer,JSONPath=`.status.agentCount`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// MemoryPolicy says what the long-term memory of the AgentRuntimes it
// selects keeps: for how long, how much per user, how it is retrieved and
// what personal data is redacted first. Where two policies select one
// agent, the older is in force.
type MemoryPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state of the MemoryPolicy.
	// +required
	Spec MemoryPolicySpec `json:"spec"`

	// status is the observed state, written by its controller.
	// +optional
	Status AgentPolicyStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// MemoryPolicyList is a list of MemoryPolicies.
type MemoryPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the MemoryPolicies.
	Items []MemoryPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MemoryPolicy{}, &MemoryPolicyList{})
}
