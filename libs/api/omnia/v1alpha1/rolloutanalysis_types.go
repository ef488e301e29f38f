package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RolloutAnalysisSpec is a metric check an AgentRuntime rollout step runs
// before it moves on: one Prometheus instant query and the condition its
// result must meet.
type RolloutAnalysisSpec struct {
	// args are the template's arguments, referenced in query as
	// {{args.<name>}}. A rollout step's analysis.args override these values;
	// an argument without a value here must be given by every step that
	// runs the template.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Args []RolloutAnalysisArg `json:"args,omitempty"`

	// query is a PromQL instant query, such as
	// sum(rate(omnia_requests_total{agent="{{args.agent}}",code!~"5.."}[5m])) / sum(rate(omnia_requests_total{agent="{{args.agent}}"}[5m])).
	// The first sample of a vector result, or a scalar result, is result[0].
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=8192
	Query string `json:"query"`

	// successCondition is what the result must meet for the analysis to
	// pass: result[<index>] <op> <number>, op being one of >=, <=, >, <,
	// == and !=, such as "result[0] >= 0.95".
	// +required
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^\s*result\[[0-9]+\]\s*(>=|<=|==|!=|>|<)\s*[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?\s*$`
	SuccessCondition string `json:"successCondition"`
}

// RolloutAnalysisArg is one argument of a RolloutAnalysis.
type RolloutAnalysisArg struct {
	// name of the argument, as written in {{args.<name>}}.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+$`
	Name string `json:"name"`

	// value is the default; a step's argument of the same name overrides
	// it. Without a value the step must supply one.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Value *string `json:"value,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=rolloutanalyses,singular=rolloutanalysis,scope=Namespaced,categories={omnia,agentplane}
// +kubebuilder:printcolumn:name="Condition",type=string,JSONPath=`.spec.successCondition`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// RolloutAnalysis is a metric check that an AgentRuntime's spec.rollout
// runs as an analysis step, in the agent's namespace. It is a template: it
// holds no state, and the AgentRuntime records each run's outcome in its
// own status.rollout.
type RolloutAnalysis struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the query and the condition it must meet.
	// +required
	Spec RolloutAnalysisSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// RolloutAnalysisList is a list of RolloutAnalyses.
type RolloutAnalysisList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the RolloutAnalyses.
	Items []RolloutAnalysis `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RolloutAnalysis{}, &RolloutAnalysisList{})
}
