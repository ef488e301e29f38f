package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RolloutConfig moves an agent from its current configuration (stable) to a
// candidate step by step. Canary, blue-green and experiments are different
// step sequences. No rollout is active while candidate is unset or equal to
// the spec.
type RolloutConfig struct {
	// candidate holds the settings that differ in the candidate; only the
	// fields set here differ from the spec. Set it to start a rollout; it is
	// cleared when the candidate is promoted.
	// +optional
	Candidate *CandidateOverrides `json:"candidate,omitempty"`

	// steps are executed in order: setWeight shifts traffic, pause holds,
	// analysis gates on metrics. After the last step the candidate is
	// promoted.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Steps []RolloutStep `json:"steps"`

	// stickySession keeps each user on one variant during the rollout.
	// +optional
	StickySession *StickySessionConfig `json:"stickySession,omitempty"`

	// rollback decides what happens when the candidate is unhealthy or fails
	// analysis.
	// +optional
	Rollback *RollbackConfig `json:"rollback,omitempty"`

	// trafficRouting decides how traffic weights are enforced. Without it,
	// both variants run their full replicas behind the one Service.
	// +optional
	TrafficRouting *TrafficRoutingConfig `json:"trafficRouting,omitempty"`

	// trigger starts a rollout by itself whenever a newer PromptPack version
	// becomes Active on the given channel. Requires spec.promptPackRef to pin
	// a version (and not to follow a track).
	// +optional
	Trigger *RolloutTrigger `json:"trigger,omitempty"`
}

// CandidateOverrides are the settings of the rollout candidate that differ
// from the spec.
type CandidateOverrides struct {
	// promptPackRef selects the candidate's PromptPack. A live PromptPack
	// cannot be rolled out.
	// +optional
	PromptPackRef *PromptPackRef `json:"promptPackRef,omitempty"`

	// providerRefs replace spec.providers for the candidate.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	ProviderRefs []NamedProviderRef `json:"providerRefs,omitempty"`

	// toolRegistryRef selects the candidate's ToolRegistry.
	// +optional
	ToolRegistryRef *ToolRegistryRef `json:"toolRegistryRef,omitempty"`
}

// RolloutStep is one step; exactly one of setWeight, pause and analysis is
// set.
//
// +kubebuilder:validation:XValidation:rule="(has(self.setWeight) ? 1 : 0) + (has(self.pause) ? 1 : 0) + (has(self.analysis) ? 1 : 0) == 1",message="rollout step: set exactly one of setWeight, pause and analysis"
type RolloutStep struct {
	// setWeight sends this percentage of traffic (0 to 100) to the candidate.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	SetWeight *int32 `json:"setWeight,omitempty"`

	// pause holds the rollout, for a duration or until the step is edited.
	// +optional
	Pause *RolloutPause `json:"pause,omitempty"`

	// analysis runs a RolloutAnalysis; the rollout advances only when it
	// passes.
	// +optional
	Analysis *RolloutAnalysisStep `json:"analysis,omitempty"`
}

// RolloutPause holds a rollout.
type RolloutPause struct {
	// duration of the hold, as a Go duration. Without it the rollout holds
	// until someone edits the rollout.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// RolloutAnalysisStep runs a RolloutAnalysis template.
type RolloutAnalysisStep struct {
	// templateName is the RolloutAnalysis, in the agent's namespace, to run.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TemplateName string `json:"templateName"`

	// args override the template's arguments.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Args []AnalysisArg `json:"args,omitempty"`
}

// AnalysisArg is one argument of an analysis template.
type AnalysisArg struct {
	// name of the argument.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// value of the argument.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value"`
}

// StickySessionConfig keeps each user on one variant.
type StickySessionConfig struct {
	// hashOn is the request header whose value is hashed to pick the
	// variant, such as x-user-id.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	HashOn string `json:"hashOn"`
}

// RollbackMode decides when a rollout is rolled back.
// +kubebuilder:validation:Enum=automatic;manual;disabled
type RollbackMode string

// Rollback modes.
const (
	// RollbackAutomatic rolls back when the candidate cannot become healthy
	// or fails an analysis.
	RollbackAutomatic RollbackMode = "automatic"
	// RollbackManual never rolls back by itself; a failed analysis holds the
	// rollout.
	RollbackManual RollbackMode = "manual"
	// RollbackDisabled never rolls back.
	RollbackDisabled RollbackMode = "disabled"
)

// RollbackConfig decides rollback behaviour.
type RollbackConfig struct {
	// mode is automatic, manual (the default) or disabled.
	// +optional
	// +kubebuilder:default=manual
	Mode RollbackMode `json:"mode,omitempty"`

	// cooldown is the least time between a rollback and the next rollout, as
	// a Go duration. Defaults to 5m.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	Cooldown *metav1.Duration `json:"cooldown,omitempty"`
}

// TrafficRoutingMode is how traffic weights are enforced.
// +kubebuilder:validation:Enum=mesh;replicaWeighted;external
type TrafficRoutingMode string

// Traffic routing modes.
const (
	// TrafficRoutingMesh: the operator owns an Istio VirtualService and
	// DestinationRule; falls back to replicaWeighted without a mesh.
	TrafficRoutingMesh TrafficRoutingMode = "mesh"
	// TrafficRoutingReplicaWeighted: weights are approximated by splitting
	// the replicas between the two Deployments.
	TrafficRoutingReplicaWeighted TrafficRoutingMode = "replicaWeighted"
	// TrafficRoutingExternal: the operator patches the weights of your own
	// Istio VirtualService.
	TrafficRoutingExternal TrafficRoutingMode = "external"
)

// TrafficRoutingConfig decides how traffic weights are enforced. mesh
// (operator-owned routing) and istio (your own objects) exclude each other,
// and each is refused beside a mode that would ignore it.
//
// +kubebuilder:validation:XValidation:rule="!has(self.mesh) || !has(self.istio)",message="trafficRouting: set mesh or istio, not both",fieldPath=".istio",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'external' || has(self.istio)",message="trafficRouting.istio is required when trafficRouting.mode is external",fieldPath=".istio",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode == 'external' || !has(self.istio)",message="trafficRouting.istio may only be set when trafficRouting.mode is external or unset",fieldPath=".istio",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode == 'mesh' || !has(self.mesh)",message="trafficRouting.mesh may only be set when trafficRouting.mode is mesh or unset",fieldPath=".mesh",reason=FieldValueForbidden
type TrafficRoutingConfig struct {
	// mode is mesh, replicaWeighted or external. When unset: external if
	// istio is set, else mesh when a mesh is available, else replicaWeighted.
	// +optional
	Mode TrafficRoutingMode `json:"mode,omitempty"`

	// mesh configures the operator-owned mesh routing; only with mode mesh
	// (or unset), and not with istio.
	// +optional
	Mesh *MeshTrafficRouting `json:"mesh,omitempty"`

	// istio names your own VirtualService and DestinationRule; required for
	// mode external, refused with any other mode.
	// +optional
	Istio *IstioTrafficRouting `json:"istio,omitempty"`
}

// MeshTrafficRouting configures operator-owned mesh routing.
type MeshTrafficRouting struct {
	// hosts the VirtualService routes; defaults to the agent's Service.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	Hosts []string `json:"hosts,omitempty"`

	// stableSubset is the subset name of stable pods. Defaults to stable.
	// +optional
	// +kubebuilder:default=stable
	// +kubebuilder:validation:MaxLength=63
	StableSubset string `json:"stableSubset,omitempty"`

	// candidateSubset is the subset name of candidate pods. Defaults to
	// canary.
	// +optional
	// +kubebuilder:default=canary
	// +kubebuilder:validation:MaxLength=63
	CandidateSubset string `json:"candidateSubset,omitempty"`

	// waypoint is the Istio ambient waypoint the Service uses.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Waypoint string `json:"waypoint,omitempty"`
}

// IstioTrafficRouting names your own Istio objects.
type IstioTrafficRouting struct {
	// virtualService whose route weights are patched.
	// +required
	VirtualService IstioVirtualServiceRef `json:"virtualService"`

	// destinationRule that defines the two subsets.
	// +required
	DestinationRule IstioDestinationRuleRef `json:"destinationRule"`
}

// IstioVirtualServiceRef names a VirtualService and its routes.
type IstioVirtualServiceRef struct {
	// name of the VirtualService in the agent's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// routes are the names of the HTTP routes whose weights are patched.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Routes []string `json:"routes"`
}

// IstioDestinationRuleRef names a DestinationRule and its subsets.
type IstioDestinationRuleRef struct {
	// name of the DestinationRule in the agent's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// stableSubset is the subset of stable pods. Defaults to stable.
	// +optional
	// +kubebuilder:default=stable
	// +kubebuilder:validation:MaxLength=63
	StableSubset string `json:"stableSubset,omitempty"`

	// candidateSubset is the subset of candidate pods. Defaults to canary.
	// +optional
	// +kubebuilder:default=canary
	// +kubebuilder:validation:MaxLength=63
	CandidateSubset string `json:"candidateSubset,omitempty"`
}

// RolloutTrigger starts rollouts for new PromptPack versions.
type RolloutTrigger struct {
	// promptPackChannel is the channel watched: stable or prerelease.
	// +required
	PromptPackChannel PromptPackChannel `json:"promptPackChannel"`
}

// RolloutStatus reports a rollout's progress.
type RolloutStatus struct {
	// active says whether a rollout is in progress.
	// +optional
	Active bool `json:"active,omitempty"`

	// promoting says the candidate is being promoted to stable.
	// +optional
	Promoting bool `json:"promoting,omitempty"`

	// promotedGeneration is the AgentRuntime generation the promotion was
	// decided on. It is recorded before the candidate's references are
	// written into the spec: while the generation is still this one, that
	// write has not happened and is retried.
	// +optional
	PromotedGeneration *int64 `json:"promotedGeneration,omitempty"`

	// currentStep is the zero-based index of the step being executed.
	// +optional
	CurrentStep *int32 `json:"currentStep,omitempty"`

	// currentWeight is the percentage of traffic sent to the candidate.
	// +optional
	CurrentWeight *int32 `json:"currentWeight,omitempty"`

	// stableVersion is the PromptPack version of the stable variant.
	// +optional
	StableVersion string `json:"stableVersion,omitempty"`

	// candidateVersion is the PromptPack version (or track) of the candidate.
	// +optional
	CandidateVersion string `json:"candidateVersion,omitempty"`

	// startedAt is when the rollout began.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// stepStartedAt is when the current step began; pause durations count
	// from it.
	// +optional
	StepStartedAt *metav1.Time `json:"stepStartedAt,omitempty"`

	// message describes the rollout's state.
	// +optional
	Message string `json:"message,omitempty"`

	// trafficRoutingMode is the routing mode in effect.
	// +optional
	TrafficRoutingMode TrafficRoutingMode `json:"trafficRoutingMode,omitempty"`

	// trafficWeightEnforced says whether currentWeight is enforced exactly
	// (mesh) or only approximated (replicas).
	// +optional
	TrafficWeightEnforced bool `json:"trafficWeightEnforced,omitempty"`
}
