package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PromptPackChannel is a release channel of a pack. The stable channel serves
// the highest version without a prerelease part; the prerelease channel
// serves the highest version of all, prereleases included.
// +kubebuilder:validation:Enum=stable;prerelease
type PromptPackChannel string

// Release channels.
const (
	ChannelStable     PromptPackChannel = "stable"
	ChannelPrerelease PromptPackChannel = "prerelease"
)

// PromptPackSourceType is where a PromptPack's content comes from.
// +kubebuilder:validation:Enum=configmap;live
type PromptPackSourceType string

// Source types.
const (
	// SourceTypeConfigMap: the content is the pack.json key of a ConfigMap
	// in the same namespace, validated by the controller.
	SourceTypeConfigMap PromptPackSourceType = "configmap"
	// SourceTypeLive: the content is fetched by the agent runtime from a live
	// endpoint; the controller judges the PromptPack from its spec alone.
	SourceTypeLive PromptPackSourceType = "live"
)

// PromptPackSpec is the desired state of a PromptPack. A PromptPack is one
// published version: its whole spec is frozen once created.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a published PromptPack version cannot change; create a PromptPack with a new version instead"
type PromptPackSpec struct {
	// packName is the logical name shared by every version of the pack.
	// AgentRuntimes reference it in spec.promptPackRef.name, and the
	// controller copies it to the omnia.altairalabs.ai/promptpack label, so it
	// must be a valid label value (at most 63 characters).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	PackName string `json:"packName"`

	// version is this PromptPack's semantic version (semver 2.0, an optional
	// leading "v" allowed), such as "1.4.0", "v2.0.0-rc.1" or "1.4.0+build.7".
	// A version with a prerelease part ("-rc.1") serves only the prerelease
	// channel. Versions that differ only in build metadata ("+...") have equal
	// precedence: the one created later serves and the other reports
	// DuplicateVersion.
	// +required
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^v?(0|[1-9][0-9]{0,17})\.(0|[1-9][0-9]{0,17})\.(0|[1-9][0-9]{0,17})(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`
	Version string `json:"version"`

	// source says where the pack's content (pack.json) comes from.
	// +required
	Source PromptPackSource `json:"source"`

	// skills are skill bundles, synced by SkillSources in the same namespace,
	// that the agent may activate.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Skills []SkillRef `json:"skills,omitempty"`

	// skillsConfig tunes how the runtime activates skills.
	// +optional
	SkillsConfig *SkillsConfig `json:"skillsConfig,omitempty"`
}

// PromptPackSource says where a pack's content comes from.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'configmap' || has(self.configMapRef)",message="source.configMapRef is required when source.type is configmap",fieldPath=".configMapRef",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type != 'live' || has(self.live)",message="source.live is required when source.type is live",fieldPath=".live",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type == 'configmap' || !has(self.configMapRef)",message="source.configMapRef may only be set when source.type is configmap",fieldPath=".configMapRef",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="self.type == 'live' || !has(self.live)",message="source.live may only be set when source.type is live",fieldPath=".live",reason=FieldValueForbidden
type PromptPackSource struct {
	// type of the source. configmap: the pack.json key of the ConfigMap named
	// by configMapRef, validated against the PromptPack JSON Schema by the
	// controller. live: content served by the endpoint in live and fetched
	// by the agent runtime itself; the controller accepts such a PromptPack
	// from its spec alone (SourceValid, phase Active) and does not compare it
	// with other versions.
	// +required
	// +kubebuilder:validation:MaxLength=16
	Type PromptPackSourceType `json:"type"`

	// configMapRef names the ConfigMap, in the same namespace, whose
	// pack.json key holds the content. Required for type configmap.
	// +optional
	ConfigMapRef *LocalObjectReference `json:"configMapRef,omitempty"`

	// live configures a live source. Required for type live.
	// +optional
	Live *LivePromptSource `json:"live,omitempty"`
}

// LivePromptSource is content served by an endpoint and fetched by the agent
// runtime while it runs — a prompt-authoring service during development, for
// example. A live PromptPack is never Superseded and cannot take part in a
// rollout, and a packName must not mix live and published versions: an
// AgentRuntime referencing such a pack name fails.
type LivePromptSource struct {
	// url the runtime fetches pack.json from, over HTTP(S).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	URL string `json:"url"`

	// refreshInterval is how often the runtime fetches the content again, as
	// a Go duration. Defaults to 30s.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`

	// secretRef names a Secret whose key (default "token") is sent as a
	// bearer token with each fetch.
	// +optional
	SecretRef *SecretKeyRef `json:"secretRef,omitempty"`
}

// SkillRef selects skills from a SkillSource in the same namespace.
type SkillRef struct {
	// source is the name of the SkillSource in the same namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Source string `json:"source"`

	// include limits the skills taken from the source to these skill names;
	// empty means every skill of the source.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	Include []string `json:"include,omitempty"`

	// mountAs is the directory the skills are grouped under; defaults to the
	// SkillSource name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	MountAs string `json:"mountAs,omitempty"`
}

// SkillSelector is how the runtime picks the skills to activate.
// +kubebuilder:validation:Enum=model-driven;tag;embedding
type SkillSelector string

// SkillsConfig tunes how the runtime activates skills.
type SkillsConfig struct {
	// maxActive caps the skills active at once (the runtime's default is 5).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxActive *int32 `json:"maxActive,omitempty"`

	// selector is how skills are picked: model-driven (the default), tag or
	// embedding.
	// +optional
	// +kubebuilder:default=model-driven
	Selector SkillSelector `json:"selector,omitempty"`
}

// PromptPackPhase summarises a PromptPack's state.
// +kubebuilder:validation:Enum=Pending;Active;Superseded;Failed
type PromptPackPhase string

// PromptPack phases.
const (
	// PromptPackPhasePending: not validated yet.
	PromptPackPhasePending PromptPackPhase = "Pending"
	// PromptPackPhaseActive: valid and the highest version on its channel
	// (or a live source).
	PromptPackPhaseActive PromptPackPhase = "Active"
	// PromptPackPhaseSuperseded: valid, but a higher validated version (or a
	// later one of equal precedence) serves its channel.
	PromptPackPhaseSuperseded PromptPackPhase = "Superseded"
	// PromptPackPhaseFailed: the source or the schema validation failed.
	PromptPackPhaseFailed PromptPackPhase = "Failed"
)

// PromptPackStatus is the observed state of a PromptPack.
type PromptPackStatus struct {
	// phase is Pending, Active, Superseded or Failed.
	// +optional
	Phase PromptPackPhase `json:"phase,omitempty"`

	// activeVersion is spec.version while this PromptPack serves its
	// channel; it is cleared when the version is superseded.
	// +optional
	ActiveVersion *string `json:"activeVersion,omitempty"`

	// channel is the highest channel this version can serve: stable for a
	// release version, prerelease for a version with a prerelease part.
	// +optional
	Channel PromptPackChannel `json:"channel,omitempty"`

	// contentDigest is the SHA-256 digest of pack.json when this version
	// first validated, as "sha256:<hex>". It is pinned: a later edit of the
	// ConfigMap does not replace it but sets ContentDrifted, and it is kept
	// while the version fails. Empty until the first validation and for
	// live sources.
	// +optional
	ContentDigest string `json:"contentDigest,omitempty"`

	// lastUpdated is when the controller last changed this status.
	// +optional
	LastUpdated *metav1.Time `json:"lastUpdated,omitempty"`

	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// skills are the skills spec.skills resolved to, sorted by name, for
	// the agent runtime to mount. Set only while none of SkillsResolved,
	// SkillsValid and SkillToolsResolved is False (a partial or ambiguous
	// set is never offered); empty otherwise.
	// +optional
	// +listType=atomic
	Skills []ResolvedSkill `json:"skills,omitempty"`

	// conditions detail the state: SourceValid, SchemaValid, AgentsNotified,
	// Superseded, SkillsResolved, SkillsValid, SkillToolsResolved and
	// ContentDrifted.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ResolvedSkill is one skill a PromptPack's spec.skills resolved to.
type ResolvedSkill struct {
	// name of the skill, unique within the pack.
	// +required
	Name string `json:"name"`

	// source is the SkillSource, in the pack's namespace, the skill comes
	// from.
	// +required
	Source string `json:"source"`

	// group is the directory the skill is mounted under: the SkillRef's
	// mountAs, or the SkillSource name when mountAs is empty. The runtime
	// finds the skill at <group>/<name>/SKILL.md.
	// +required
	Group string `json:"group"`

	// key is the data key of the SkillSource's ConfigMap that holds the
	// skill document.
	// +required
	Key string `json:"key"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=promptpacks,singular=promptpack,shortName=pp,scope=Namespaced,categories={omnia,agentplane}
// +kubebuilder:printcolumn:name="Pack",type=string,JSONPath=`.spec.packName`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PromptPack is one published, immutable version of a pack of prompts.
// Versions of one pack share spec.packName; the controller validates each
// and marks the highest valid version of each channel Active.
type PromptPack struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state of the PromptPack; immutable once created.
	// +required
	Spec PromptPackSpec `json:"spec"`

	// status is the observed state of the PromptPack, written by its
	// controller.
	// +optional
	Status PromptPackStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// PromptPackList is a list of PromptPacks.
type PromptPackList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the PromptPacks.
	Items []PromptPack `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PromptPack{}, &PromptPackList{})
}
