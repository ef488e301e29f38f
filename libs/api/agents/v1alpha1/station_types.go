package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConcurrencyPolicy says what a Station does with a new run when it is full.
// +kubebuilder:validation:Enum=Allow;Forbid;Replace
type ConcurrencyPolicy string

const (
	// AllowConcurrent runs up to maxConcurrentRuns at once (0 = no limit);
	// further Agents wait in Pending.
	AllowConcurrent ConcurrencyPolicy = "Allow"
	// ForbidConcurrent runs one Agent at a time; further Agents wait in Pending.
	ForbidConcurrent ConcurrencyPolicy = "Forbid"
	// ReplaceConcurrent runs one Agent at a time; a new Agent deletes the
	// oldest Running one and starts at once.
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

const (
	// DefaultDeadlineMinutes is the run deadline of a Station that sets none.
	DefaultDeadlineMinutes = 30
	// DefaultRunsHistoryLimit is how many finished runs of each outcome a
	// Station keeps when it sets no limit.
	DefaultRunsHistoryLimit = 3
)

// StationSpec is where and how a recipe runs: the pod, the time budget, how
// many runs at once and how many finished runs to keep.
type StationSpec struct {
	// agentDefRef is the name of the AgentDefinition, in the Station's
	// namespace, that runs in this Station. A missing definition fails the
	// Agent at start.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	AgentDefRef string `json:"agentDefRef"`

	// deadlineMinutes is how long one run may take, in minutes, before it is
	// stopped and fails. It becomes the Job's activeDeadlineSeconds; the
	// agent process gets 10 seconds less so it can still report its end.
	// Defaults to 30.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	DeadlineMinutes int32 `json:"deadlineMinutes,omitempty"`

	// successfulRunsHistoryLimit is how many Succeeded Agents of this Station
	// to keep; older ones (by completedAt) are deleted together with their
	// Jobs. 0 keeps none. Defaults to 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	SuccessfulRunsHistoryLimit *int32 `json:"successfulRunsHistoryLimit,omitempty"`

	// failedRunsHistoryLimit is how many Failed Agents of this Station to
	// keep; older ones are deleted. 0 keeps none. Defaults to 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	FailedRunsHistoryLimit *int32 `json:"failedRunsHistoryLimit,omitempty"`

	// maxConcurrentRuns caps how many Agents of this Station run at once
	// under concurrencyPolicy Allow; 0 or unset means no cap. Forbid and
	// Replace always allow one and ignore it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxConcurrentRuns int32 `json:"maxConcurrentRuns,omitempty"`

	// concurrencyPolicy says what happens to a new Agent when the Station is
	// full: Allow and Forbid keep it Pending until a run finishes (Forbid
	// with a limit of one), Replace deletes the oldest Running Agent and
	// starts the new one. Defaults to Allow.
	// +optional
	// +kubebuilder:default=Allow
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// template is the pod template of every run's Job. It must have a
	// container named "agent" (its image is the agent's workspace); the
	// controller sets that container's command, env, mounts and security
	// context and replaces init containers. Other containers are left as
	// they are, but the Job's pod must meet the Pod Security Standards level
	// the controller runs with (restricted unless --pod-security-level says
	// baseline, docs/agent-controller.md "Pod security"): where the
	// template leaves runAsNonRoot, allowPrivilegeEscalation, the dropped
	// capabilities or the seccomp profile unset, restricted fills them in,
	// and a run whose pod still breaks the level fails. Admission refuses
	// what breaks either level and can be read off the template: host
	// namespaces, a shared process namespace, a service account token,
	// hostPath volumes, privileged containers, host ports and unconfined
	// seccomp or AppArmor profiles. Its containers and init containers are
	// at most 64 each, with at most 128 ports each, its volumes at most 256
	// and a projected volume's sources at most 64, so those rules fit
	// admission's cost budget.
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.hostNetwork) || !self.spec.hostNetwork",message="spec.template.spec.hostNetwork must not be true: a run pod may not use the node's network namespace",fieldPath=".spec.hostNetwork",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.hostPID) || !self.spec.hostPID",message="spec.template.spec.hostPID must not be true: a run pod may not use the node's PID namespace",fieldPath=".spec.hostPID",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.hostIPC) || !self.spec.hostIPC",message="spec.template.spec.hostIPC must not be true: a run pod may not use the node's IPC namespace",fieldPath=".spec.hostIPC",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.shareProcessNamespace) || !self.spec.shareProcessNamespace",message="spec.template.spec.shareProcessNamespace must not be true: sidecars may not see the agent's processes",fieldPath=".spec.shareProcessNamespace",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.automountServiceAccountToken) || !self.spec.automountServiceAccountToken",message="spec.template.spec.automountServiceAccountToken must not be true: a run pod gets no Kubernetes API token",fieldPath=".spec.automountServiceAccountToken",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.volumes) || self.spec.volumes.all(v, !has(v.hostPath))",message="spec.template.spec.volumes[*].hostPath must not be set: a run pod may not mount the node's files",fieldPath=".spec.volumes",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.volumes) || self.spec.volumes.all(v, !has(v.projected) || !has(v.projected.sources) || v.projected.sources.all(s, !has(s.serviceAccountToken)))",message="spec.template.spec.volumes[*].projected.sources[*].serviceAccountToken must not be set: a run pod gets no Kubernetes API token",fieldPath=".spec.volumes",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.containers) || self.spec.containers.all(c, !has(c.securityContext) || !has(c.securityContext.privileged) || !c.securityContext.privileged)",message="spec.template.spec.containers[*].securityContext.privileged must not be true",fieldPath=".spec.containers",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.initContainers) || self.spec.initContainers.all(c, !has(c.securityContext) || !has(c.securityContext.privileged) || !c.securityContext.privileged)",message="spec.template.spec.initContainers[*].securityContext.privileged must not be true",fieldPath=".spec.initContainers",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.containers) || self.spec.containers.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",message="spec.template.spec.containers[*].ports[*].hostPort must not be set: a run pod may not listen on the node's ports",fieldPath=".spec.containers",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.initContainers) || self.spec.initContainers.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",message="spec.template.spec.initContainers[*].ports[*].hostPort must not be set: a run pod may not listen on the node's ports",fieldPath=".spec.initContainers",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.securityContext) || !has(self.spec.securityContext.seccompProfile) || self.spec.securityContext.seccompProfile.type != 'Unconfined'",message="spec.template.spec.securityContext.seccompProfile.type must not be Unconfined",fieldPath=".spec.securityContext",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.containers) || self.spec.containers.all(c, !has(c.securityContext) || !has(c.securityContext.seccompProfile) || c.securityContext.seccompProfile.type != 'Unconfined')",message="spec.template.spec.containers[*].securityContext.seccompProfile.type must not be Unconfined",fieldPath=".spec.containers",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.initContainers) || self.spec.initContainers.all(c, !has(c.securityContext) || !has(c.securityContext.seccompProfile) || c.securityContext.seccompProfile.type != 'Unconfined')",message="spec.template.spec.initContainers[*].securityContext.seccompProfile.type must not be Unconfined",fieldPath=".spec.initContainers",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.securityContext) || !has(self.spec.securityContext.appArmorProfile) || self.spec.securityContext.appArmorProfile.type != 'Unconfined'",message="spec.template.spec.securityContext.appArmorProfile.type must not be Unconfined",fieldPath=".spec.securityContext",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.containers) || self.spec.containers.all(c, !has(c.securityContext) || !has(c.securityContext.appArmorProfile) || c.securityContext.appArmorProfile.type != 'Unconfined')",message="spec.template.spec.containers[*].securityContext.appArmorProfile.type must not be Unconfined",fieldPath=".spec.containers",reason="FieldValueForbidden"
	// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.initContainers) || self.spec.initContainers.all(c, !has(c.securityContext) || !has(c.securityContext.appArmorProfile) || c.securityContext.appArmorProfile.type != 'Unconfined')",message="spec.template.spec.initContainers[*].securityContext.appArmorProfile.type must not be Unconfined",fieldPath=".spec.initContainers",reason="FieldValueForbidden"
	// +required
	Template corev1.PodTemplateSpec `json:"template"`
}

// EffectiveMaxConcurrent returns how many Agents of the Station may run at
// once; 0 means no limit. Forbid and Replace allow one whatever
// maxConcurrentRuns says; Allow (and an unset or unknown policy) uses it.
func (s *StationSpec) EffectiveMaxConcurrent() int {
	switch s.ConcurrencyPolicy {
	case ForbidConcurrent, ReplaceConcurrent:
		return 1
	}
	if s.MaxConcurrentRuns < 0 {
		return 0
	}
	return int(s.MaxConcurrentRuns)
}

// EffectiveDeadlineMinutes returns the run deadline in minutes:
// deadlineMinutes, or DefaultDeadlineMinutes when it is unset (below 1 can
// only come from an object that skipped API defaulting). Never below 1, so a
// run can never fail instantly.
func (s *StationSpec) EffectiveDeadlineMinutes() int64 {
	if s.DeadlineMinutes < 1 {
		return DefaultDeadlineMinutes
	}
	return int64(s.DeadlineMinutes)
}

// DeadlineSeconds returns the run deadline in seconds, computed in 64 bits,
// for the Job's activeDeadlineSeconds.
func (s *StationSpec) DeadlineSeconds() int64 {
	return s.EffectiveDeadlineMinutes() * 60
}

// SuccessfulHistoryLimit returns how many Succeeded Agents to keep:
// successfulRunsHistoryLimit, DefaultRunsHistoryLimit when unset, never below 0.
func (s *StationSpec) SuccessfulHistoryLimit() int {
	return historyLimit(s.SuccessfulRunsHistoryLimit)
}

// FailedHistoryLimit returns how many Failed Agents to keep:
// failedRunsHistoryLimit, DefaultRunsHistoryLimit when unset, never below 0.
func (s *StationSpec) FailedHistoryLimit() int {
	return historyLimit(s.FailedRunsHistoryLimit)
}

// HistoryLimit returns the history limit for a terminal phase, and false for
// a phase that is never pruned (Pending, Running).
func (s *StationSpec) HistoryLimit(phase AgentPhase) (int, bool) {
	switch phase {
	case PhaseSucceeded:
		return s.SuccessfulHistoryLimit(), true
	case PhaseFailed:
		return s.FailedHistoryLimit(), true
	}
	return 0, false
}

func historyLimit(limit *int32) int {
	if limit == nil {
		return DefaultRunsHistoryLimit
	}
	if *limit < 0 {
		return 0
	}
	return int(*limit)
}

// Station is where a recipe runs: it binds an AgentDefinition to a pod
// template and sets the run deadline, how many runs may go at once and how
// many finished runs are kept. Agents name a Station to run in it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=stations,singular=station,shortName=stn,scope=Namespaced,categories=agentplane
// +kubebuilder:printcolumn:name="Recipe",type=string,JSONPath=`.spec.agentDefRef`,description="The AgentDefinition that runs here"
// +kubebuilder:printcolumn:name="Deadline",type=integer,JSONPath=`.spec.deadlineMinutes`,description="Run deadline in minutes"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.concurrencyPolicy`,priority=1,description="Concurrency policy"
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxConcurrentRuns`,priority=1,description="Max concurrent runs under Allow (0 = no limit)"
// +kubebuilder:selectablefield:JSONPath=`.spec.agentDefRef`
type Station struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the Station's configuration.
	// +required
	Spec StationSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// StationList is a list of Stations.
type StationList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Stations.
	Items []Station `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Station{}, &StationList{})
}
