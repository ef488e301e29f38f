package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ScheduledFunction conditions (besides Ready) and reasons.
const (
	// ConditionScheduleValid says whether spec.schedule and spec.timeZone
	// parse.
	ConditionScheduleValid = "ScheduleValid"
	// ConditionAgentResolved says whether spec.agentRuntimeRef names an
	// AgentRuntime in mode function.
	ConditionAgentResolved = "AgentResolved"

	// ReasonScheduleParsed: the schedule and time zone parse.
	ReasonScheduleParsed = "Parsed"
	// ReasonInvalidSchedule: spec.schedule is not a five-field cron
	// expression the parser accepts.
	ReasonInvalidSchedule = "InvalidSchedule"
	// ReasonInvalidTimeZone: spec.timeZone is not an IANA time zone.
	ReasonInvalidTimeZone = "InvalidTimeZone"
	// ReasonAgentNotFound: the AgentRuntime does not exist (retried).
	ReasonAgentNotFound = "AgentNotFound"
	// ReasonAgentNotFunction: the AgentRuntime is not in mode function.
	ReasonAgentNotFunction = "NotAFunction"
	// ReasonAgentFound: the AgentRuntime exists and is a function.
	ReasonAgentFound = "Found"
	// ReasonScheduled: the function fires on its schedule.
	ReasonScheduled = "Scheduled"
	// ReasonSuspended: spec.suspend holds the schedule.
	ReasonSuspended = "Suspended"
)

// RunOutcome is how one scheduled run ended.
// +kubebuilder:validation:Enum=Running;Succeeded;Failed;Missed
type RunOutcome string

// Run outcomes.
const (
	// RunRunning: the call is in flight (recorded before it is made, so a
	// run is never made twice).
	RunRunning RunOutcome = "Running"
	// RunSucceeded: the function answered with a 2xx status.
	RunSucceeded RunOutcome = "Succeeded"
	// RunFailed: another status, no answer, or the timeout passed.
	RunFailed RunOutcome = "Failed"
	// RunMissed: the scheduled time was further back than
	// startingDeadlineSeconds when the controller saw it, so it was skipped.
	RunMissed RunOutcome = "Missed"
)

// ScheduledFunctionSpec is the desired state of a ScheduledFunction.
type ScheduledFunctionSpec struct {
	// schedule is a standard five-field cron expression (minute, hour, day
	// of month, month, day of week), such as "*/15 * * * *" or
	// "0 9 * * MON-FRI".
	// +required
	// +kubebuilder:validation:MinLength=9
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[0-9A-Za-z*,/?-]+( +[0-9A-Za-z*,/?-]+){4}$`
	Schedule string `json:"schedule"`

	// timeZone is the IANA time zone the schedule is read in, such as
	// "Europe/Berlin"; UTC when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+/-]*$`
	TimeZone string `json:"timeZone,omitempty"`

	// agentRuntimeRef names the AgentRuntime, in mode function and in this
	// namespace, that each run calls.
	// +required
	AgentRuntimeRef LocalObjectReference `json:"agentRuntimeRef"`

	// input is the JSON object sent as the body of each call.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Input *apiextensionsv1.JSON `json:"input,omitempty"`

	// suspend stops further runs while true; runs missed meanwhile are
	// handled like any missed run once it is false again.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// startingDeadlineSeconds is how late a run may start; a scheduled time
	// further back is skipped and counted as missed. Unset: the most recent
	// missed time always runs.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// timeoutSeconds bounds one call, 1 to 120 (default 30).
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=120
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// historyLimit is how many runs status.history keeps, 0 to 20
	// (default 5).
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	HistoryLimit *int32 `json:"historyLimit,omitempty"`
}

// RunRecord is one scheduled run. The function's answer body is never
// recorded, only its status code.
type RunRecord struct {
	// scheduleTime is the scheduled time the run was for.
	// +required
	ScheduleTime metav1.Time `json:"scheduleTime"`
	// finishTime is when the call ended; unset while Running and for a
	// missed run.
	// +optional
	FinishTime *metav1.Time `json:"finishTime,omitempty"`
	// outcome is Running, Succeeded, Failed or Missed.
	// +required
	Outcome RunOutcome `json:"outcome"`
	// httpStatus is the status code the function answered with.
	// +optional
	HTTPStatus int32 `json:"httpStatus,omitempty"`
	// reason is a CamelCase word for a failure or a miss, such as
	// HTTPStatus, RequestFailed, Timeout or StartingDeadlineExceeded.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// message details a failure, without the answer's body.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// ScheduledFunctionStatus is the observed state of a ScheduledFunction.
type ScheduledFunctionStatus struct {
	// observedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// lastScheduleTime is the latest scheduled time the controller handled:
	// run, or skipped as missed.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// nextScheduleTime is the next scheduled time; unset while suspended or
	// invalid.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// lastResult is the latest run.
	// +optional
	LastResult *RunRecord `json:"lastResult,omitempty"`
	// missedRuns counts the scheduled times that were not run: skipped past
	// the starting deadline, or passed over for a later one.
	// +optional
	MissedRuns int64 `json:"missedRuns,omitempty"`
	// history holds the latest runs, newest first, at most
	// spec.historyLimit.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	History []RunRecord `json:"history,omitempty"`
	// conditions detail the state: ScheduleValid, AgentResolved and Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=scheduledfunctions,singular=scheduledfunction,shortName=sfn,scope=Namespaced,categories={omnia,agentplane}
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.spec.agentRuntimeRef.name`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Outcome",type=string,JSONPath=`.status.lastResult.outcome`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`

// ScheduledFunction calls a function-mode AgentRuntime on a cron schedule,
// with a fixed input, and records how each run ended.
type ScheduledFunction struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state of the ScheduledFunction.
	// +required
	Spec ScheduledFunctionSpec `json:"spec"`

	// status is the observed state, written by its controller.
	// +optional
	Status ScheduledFunctionStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// ScheduledFunctionList is a list of ScheduledFunctions.
type ScheduledFunctionList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the ScheduledFunctions.
	Items []ScheduledFunction `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ScheduledFunction{}, &ScheduledFunctionList{})
}
