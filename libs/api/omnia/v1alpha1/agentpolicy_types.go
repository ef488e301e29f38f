package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxListedAgents caps status.appliesTo of MemoryPolicy and
// SessionRetentionPolicy, so a policy over thousands of agents keeps a
// small status; status.agentCount always holds the full count.
const MaxListedAgents = 64

// Conditions and reasons shared by the policies that select AgentRuntimes
// (MemoryPolicy, SessionRetentionPolicy).
const (
	// ConditionConflict is True when another policy of the same kind selects
	// one of this policy's agents; its message names the other policy and
	// which one is in force. The older policy (creationTimestamp, then name)
	// wins.
	ConditionConflict = "Conflict"
	// ReasonOverlap: another policy of the kind selects one of the agents.
	ReasonOverlap = "Overlap"
	// ReasonNoOverlap: no other policy of the kind selects these agents.
	ReasonNoOverlap = "NoOverlap"
	// ReasonPolicyValid: the spec is valid and the policy is in force for
	// the agents of status.appliesTo.
	ReasonPolicyValid = "Valid"
	// ReasonInvalidSelector: spec.agentSelector is not a valid label
	// selector; the policy is in force for no agent.
	ReasonInvalidSelector = "InvalidSelector"
)

// AgentPolicyStatus is the observed state of a policy that selects
// AgentRuntimes.
type AgentPolicyStatus struct {
	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// appliesTo are the names of the AgentRuntimes this policy is in force
	// for — selected by it and by no older policy of the kind — sorted, at
	// most 64 of them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	AppliesTo []string `json:"appliesTo,omitempty"`

	// agentCount is how many AgentRuntimes this policy is in force for, the
	// ones appliesTo leaves out included.
	// +optional
	AgentCount int32 `json:"agentCount,omitempty"`

	// conditions detail the state: Ready says whether the spec is valid,
	// Conflict whether another policy of the kind selects the same agents.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
