package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ToolPolicyMode is whether a ToolPolicy blocks calls or only reports them.
// +kubebuilder:validation:Enum=enforce;audit
type ToolPolicyMode string

// Policy modes.
const (
	ToolPolicyEnforce ToolPolicyMode = "enforce"
	ToolPolicyAudit   ToolPolicyMode = "audit"
)

// ToolPolicyFailureAction is what happens to a call when its policy cannot
// be evaluated (an expression error, a missing claim value).
// +kubebuilder:validation:Enum=deny;allow
type ToolPolicyFailureAction string

// Failure actions.
const (
	ToolPolicyFailDeny  ToolPolicyFailureAction = "deny"
	ToolPolicyFailAllow ToolPolicyFailureAction = "allow"
)

// ToolPolicySpec is the desired state of a ToolPolicy.
type ToolPolicySpec struct {
	// selector says which tool calls the policy governs.
	// +required
	Selector ToolPolicySelector `json:"selector"`

	// rules are deny rules; a call is refused when any rule's expression is
	// true.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Rules []ToolPolicyRule `json:"rules"`

	// requiredClaims are identity claims a caller must present for any
	// governed call.
	// +optional
	// +listType=map
	// +listMapKey=claim
	// +kubebuilder:validation:MaxItems=32
	RequiredClaims []RequiredClaim `json:"requiredClaims,omitempty"`

	// mode is enforce (refuse denied calls, the default) or audit (allow
	// them and record the decision).
	// +optional
	// +kubebuilder:default=enforce
	Mode ToolPolicyMode `json:"mode,omitempty"`

	// onFailure is what happens when the policy cannot be evaluated: deny
	// (the default) or allow.
	// +optional
	// +kubebuilder:default=deny
	OnFailure ToolPolicyFailureAction `json:"onFailure,omitempty"`

	// headerInjection adds headers to the governed outbound tool calls.
	// +optional
	// +listType=map
	// +listMapKey=header
	// +kubebuilder:validation:MaxItems=32
	HeaderInjection []HeaderInjection `json:"headerInjection,omitempty"`
}

// ToolPolicySelector binds a policy to a ToolRegistry and, optionally, to
// some of its tools.
type ToolPolicySelector struct {
	// registry is the name of the ToolRegistry, in the same namespace, whose
	// tool calls are governed. That registry reports PolicyBound.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Registry string `json:"registry"`

	// tools limits the policy to these tool names; empty governs every tool
	// of the registry.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	Tools []string `json:"tools,omitempty"`
}

// ToolPolicyRule is one named deny rule.
type ToolPolicyRule struct {
	// name identifies the rule in decisions and metrics.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// description explains the rule to people reading decisions.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// deny is the condition under which the call is refused.
	// +required
	Deny ToolPolicyDeny `json:"deny"`
}

// ToolPolicyDeny is a CEL condition and the message of the refusal.
type ToolPolicyDeny struct {
	// cel is a CEL expression over the call (tool name, arguments, caller
	// identity and claims) that is true when the call must be refused.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	CEL string `json:"cel"`

	// message is returned to the model when the call is refused.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message"`
}

// RequiredClaim is an identity claim a caller must carry.
type RequiredClaim struct {
	// claim name, such as "sub" or "groups".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Claim string `json:"claim"`

	// message is returned when the claim is missing.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// HeaderInjection adds one header to governed calls, from a fixed value or a
// CEL expression; exactly one of value and cel is set.
//
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.cel)",message="headerInjection: set exactly one of value and cel"
type HeaderInjection struct {
	// header name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Header string `json:"header"`

	// value is a fixed header value.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value *string `json:"value,omitempty"`

	// cel is a CEL expression over the call that yields the header value.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	CEL *string `json:"cel,omitempty"`
}

// ToolPolicyPhase summarises a ToolPolicy's state.
// +kubebuilder:validation:Enum=Active;Error
type ToolPolicyPhase string

// ToolPolicy phases.
const (
	// ToolPolicyPhaseActive: every expression compiled; the policy is enforced.
	ToolPolicyPhaseActive ToolPolicyPhase = "Active"
	// ToolPolicyPhaseError: an expression failed to compile.
	ToolPolicyPhaseError ToolPolicyPhase = "Error"
)

// ToolPolicyStatus is the observed state of a ToolPolicy.
type ToolPolicyStatus struct {
	// phase is Active or Error.
	// +optional
	Phase ToolPolicyPhase `json:"phase,omitempty"`

	// ruleCount is the number of compiled rules.
	// +optional
	RuleCount int32 `json:"ruleCount,omitempty"`

	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions detail the state: Compiled, Ready and HeaderRefsCanonical.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ToolPolicy condition types and reasons.
const (
	// ConditionCompiled: every CEL expression of the policy compiled.
	ConditionCompiled = "Compiled"
	// ConditionHeaderRefsCanonical: header references in expressions use
	// canonical header names.
	ConditionHeaderRefsCanonical = "HeaderRefsCanonical"

	ReasonPolicyCompiled        = "PolicyCompiled"
	ReasonCompileError          = "CompileError"
	ReasonPolicyValidated       = "PolicyValidated"
	ReasonHeaderRefsCanonical   = "HeaderRefsCanonical"
	ReasonNonCanonicalHeaderRef = "NonCanonicalHeaderRef"
	EventPolicyCompiled         = "PolicyCompiled"
	EventCompileError           = "CompileError"
	EventNonCanonicalHeaderRef  = "NonCanonicalHeaderRef"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=toolpolicies,singular=toolpolicy,shortName=tp,scope=Namespaced,categories={omnia,agentplane}
// +kubebuilder:printcolumn:name="Registry",type=string,JSONPath=`.spec.selector.registry`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Rules",type=integer,JSONPath=`.status.ruleCount`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ToolPolicy governs the tool calls of one ToolRegistry: CEL deny rules,
// required identity claims and injected headers, enforced at call time. The
// registry it selects reports the binding in its PolicyBound condition.
type ToolPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state of the ToolPolicy.
	// +required
	Spec ToolPolicySpec `json:"spec"`

	// status is the observed state of the ToolPolicy, written by its
	// controller.
	// +optional
	Status ToolPolicyStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// ToolPolicyList is a list of ToolPolicies.
type ToolPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the ToolPolicies.
	Items []ToolPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ToolPolicy{}, &ToolPolicyList{})
}
