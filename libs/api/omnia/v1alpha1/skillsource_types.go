package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SkillDocumentKey is the name of a skill document in a SkillSource's
// ConfigMap, alone or as the suffix "<skill-dir>.SKILL.md". ConfigMap keys
// cannot hold "/", so the dot stands for the directory separator of the
// usual "<skill-dir>/SKILL.md" layout.
const SkillDocumentKey = "SKILL.md"

// SkillSourceSpec is the desired state of a SkillSource.
type SkillSourceSpec struct {
	// configMapRef names the ConfigMap, in the same namespace, that holds the
	// skill documents. Every data key that is "SKILL.md" or ends in
	// ".SKILL.md" (for example "refunds.SKILL.md") is one skill document;
	// other keys and binaryData are ignored. A document starts with YAML
	// frontmatter between two "---" lines carrying name (lowercase letters,
	// digits and hyphens, at most 64 characters), description and an
	// optional allowed-tools list; the Markdown body follows.
	// +required
	ConfigMapRef LocalObjectReference `json:"configMapRef"`
}

// SkillSourcePhase summarises a SkillSource's state.
// +kubebuilder:validation:Enum=Pending;Ready;Error
type SkillSourcePhase string

// SkillSource phases.
const (
	// SkillSourcePhasePending: the controller has not judged the source yet.
	SkillSourcePhasePending SkillSourcePhase = "Pending"
	// SkillSourcePhaseReady: every skill document parsed; status.skills
	// lists them.
	SkillSourcePhaseReady SkillSourcePhase = "Ready"
	// SkillSourcePhaseError: the ConfigMap is missing or its content is not
	// a usable set of skills; the Ready condition says why.
	SkillSourcePhaseError SkillSourcePhase = "Error"
)

// SkillSource condition reasons, on the Ready condition.
const (
	// ReasonSkillsSynced: every skill document parsed.
	ReasonSkillsSynced = "SkillsSynced"
	// ReasonSkillConfigMapNotFound: spec.configMapRef names no ConfigMap.
	ReasonSkillConfigMapNotFound = "ConfigMapNotFound"
	// ReasonNoSkillDocuments: the ConfigMap has no skill document key.
	ReasonNoSkillDocuments = "NoSkillDocuments"
	// ReasonInvalidSkillDocument: a skill document's frontmatter is
	// malformed; the message carries the parser's error.
	ReasonInvalidSkillDocument = "InvalidSkillDocument"
	// ReasonDuplicateSkillName: two documents declare the same skill name.
	ReasonDuplicateSkillName = "DuplicateSkillName"
)

// SkillSourceSkill is one skill found in a SkillSource's content.
type SkillSourceSkill struct {
	// name of the skill, from its frontmatter; unique within the source.
	// +required
	Name string `json:"name"`

	// description of the skill, from its frontmatter; the runtime shows it
	// to the model to choose skills.
	// +optional
	Description string `json:"description,omitempty"`

	// allowedTools are the tools the skill may call, from its frontmatter's
	// allowed-tools list; a PromptPack using the skill must declare each.
	// +optional
	// +listType=atomic
	AllowedTools []string `json:"allowedTools,omitempty"`

	// key is the ConfigMap data key holding the skill document.
	// +required
	Key string `json:"key"`
}

// SkillSourceStatus is the observed state of a SkillSource.
type SkillSourceStatus struct {
	// phase is Pending, Ready or Error.
	// +optional
	Phase SkillSourcePhase `json:"phase,omitempty"`

	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// skills are the skills of the current content, sorted by name; empty
	// unless the phase is Ready.
	// +optional
	// +listType=map
	// +listMapKey=name
	Skills []SkillSourceSkill `json:"skills,omitempty"`

	// contentChecksum is the SHA-256 digest, as "sha256:<hex>", of the
	// skill document keys and their content, so a consumer can tell that
	// the content changed. Empty unless the phase is Ready.
	// +optional
	ContentChecksum string `json:"contentChecksum,omitempty"`

	// conditions detail the state; Ready says whether the skills are usable.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=skillsources,singular=skillsource,shortName=sks,scope=Namespaced,categories={omnia,agentplane}
// +kubebuilder:printcolumn:name="ConfigMap",type=string,JSONPath=`.spec.configMapRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Checksum",type=string,JSONPath=`.status.contentChecksum`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// SkillSource publishes a set of agent skills — Markdown documents with
// YAML frontmatter — from a ConfigMap in its namespace. PromptPacks select
// skills from it in spec.skills.
type SkillSource struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state of the SkillSource.
	// +required
	Spec SkillSourceSpec `json:"spec"`

	// status is the observed state of the SkillSource, written by its
	// controller.
	// +optional
	Status SkillSourceStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// SkillSourceList is a list of SkillSources.
type SkillSourceList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the SkillSources.
	Items []SkillSource `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SkillSource{}, &SkillSourceList{})
}

// IsSynced reports whether the status describes the current spec and
// lists usable skills.
func (s *SkillSource) IsSynced() bool {
	return s.Status.Phase == SkillSourcePhaseReady && s.Status.ObservedGeneration == s.Generation
}
