package v1alpha1

import (
	"errors"
	"fmt"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentPhase is where an Agent is in its life: Pending, Running, Succeeded or Failed.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type AgentPhase string

const (
	// PhasePending means created but not started yet. The Agent may be waiting for a
	// free slot of its Station. An Agent with no phase is Pending.
	PhasePending AgentPhase = "Pending"
	// PhaseRunning means the Job exists or the batch was submitted.
	PhaseRunning AgentPhase = "Running"
	// PhaseSucceeded means the run finished with exit code 0. Terminal.
	PhaseSucceeded AgentPhase = "Succeeded"
	// PhaseFailed means the run failed, or could not start. Terminal.
	PhaseFailed AgentPhase = "Failed"
)

// IsTerminal reports whether p is Succeeded or Failed; a terminal Agent is
// never reconciled again.
func (p AgentPhase) IsTerminal() bool {
	return p == PhaseSucceeded || p == PhaseFailed
}

// BatchProvider names the vendor batch API a batch run was submitted to.
// +kubebuilder:validation:Enum=anthropic;openai;gemini
type BatchProvider string

const (
	// BatchProviderAnthropic is the Anthropic Message Batches API.
	BatchProviderAnthropic BatchProvider = "anthropic"
	// BatchProviderOpenAI is the OpenAI Batch API.
	BatchProviderOpenAI BatchProvider = "openai"
	// BatchProviderGemini is the Gemini batch mode API.
	BatchProviderGemini BatchProvider = "gemini"
)

// AgentSpec is what to run: which Station, with which inputs. It is fixed at
// creation; an Agent is a single run, so to run again create a new Agent.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: an Agent is one run; create a new Agent"
type AgentSpec struct {
	// stationRef is the name of the Station, in the Agent's namespace, to run
	// in. The Station supplies the recipe (its agentDefRef), the pod template,
	// the deadline and the concurrency rules. A missing Station fails the
	// Agent rather than leaving it Pending.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	StationRef string `json:"stationRef"`

	// taskId is an identifier from the system that asked for this run (an
	// issue, a ticket, a workflow id). It is passed to the run as TASK_ID and
	// stamped on every sink event as source.task, so results can be matched
	// back to their request.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	TaskID string `json:"taskId,omitempty"`

	// targetRepo is the repository the run is about, usually "owner/name".
	// It is only handed to the run as TARGET_REPO; repositories are cloned
	// from the definition's resources.repos.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	TargetRepo string `json:"targetRepo,omitempty"`

	// branch is the branch the run should work on. It is only handed to the
	// run as BRANCH_NAME.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Branch string `json:"branch,omitempty"`

	// parameters fill the {name} placeholders of the definition's prompt; a
	// placeholder without a value stays as written so typos are visible. They
	// are also passed to the run as the JSON object AGENT_PARAMETERS. At most
	// 128 of them; each name is 1 to 128 of the placeholder characters
	// [A-Za-z0-9_.-] and each value at most 16384 characters (16 KiB of
	// ASCII; CEL counts characters, not bytes). The prompt they render
	// may be at most 1 MiB (prompt.MaxRenderedBytes), or the Agent fails
	// before it starts.
	// +optional
	// +kubebuilder:validation:MaxProperties=128
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) >= 1 && size(k) <= 128 && k.matches('^[A-Za-z0-9_.-]+$'))",message="spec.parameters: each name must be 1 to 128 of the characters A-Z a-z 0-9 _ . -"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 16384)",message="spec.parameters: each value must be at most 16384 characters"
	Parameters map[string]string `json:"parameters,omitempty"`

	// model overrides the AgentDefinition's model for this run only, e.g. to
	// try a recipe on a cheaper model. Empty means the definition's model,
	// and when that is empty too, claude-opus-5-5. The model also selects the
	// vendor (Claude, Codex/OpenAI, Gemini, OpenCode or exec).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model,omitempty"`

	// resumeSession is the vendor session id of an earlier conversation to
	// continue. The run restores that conversation instead of sending the
	// initial prompt. Only realtime runs whose definition sets
	// resources.conversation.source, with a vendor able to resume, can honour
	// it; otherwise the controller fails the Agent at Pending with the reason.
	// It becomes a path of the conversation store and an argument of the
	// CLI, so it is one word of letters, digits, "_" and "-" that starts
	// with a letter or digit (SessionIDPattern), as every vendor's ids are:
	// UUIDs (Claude Code, Codex, Gemini CLI) or "ses_..." (OpenCode).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_-]*$`
	ResumeSession string `json:"resumeSession,omitempty"`
}

// SessionIDPattern is what a conversation's id may look like: the Agent's
// spec.resumeSession and the definition's resources.conversation id and
// pin. Such an id is joined to the store's URL and passed to the vendor
// CLI, so it may hold no "/" or "." (no other path of the store) and may
// not start with "-" (no flag). The CRD carries the same pattern.
const SessionIDPattern = `^[A-Za-z0-9][A-Za-z0-9_-]*$`

// sessionID matches SessionIDPattern.
var sessionID = regexp.MustCompile(SessionIDPattern)

// ErrInvalidSessionID is wrapped by CheckSessionID's errors.
var ErrInvalidSessionID = errors.New("not a session id")

// CheckSessionID returns nil when id matches SessionIDPattern, else an
// error wrapping ErrInvalidSessionID that says why, naming what (e.g.
// "spec.resumeSession"). The id is quoted with %q, so a control character
// in it cannot forge a log line.
func CheckSessionID(what, id string) error {
	if sessionID.MatchString(id) {
		return nil
	}
	return fmt.Errorf("%s %q is %w: it must be letters, digits, \"_\" and \"-\", starting with a letter or digit (no \"/\", no \".\", no leading \"-\")",
		what, id, ErrInvalidSessionID)
}

// AgentStatus is the observed state of a run. Only the controllers write it:
// the agent controller everything but sessionId, the realtime gateway sessionId.
type AgentStatus struct {
	// observedGeneration is the metadata.generation the controller last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is Pending, Running, Succeeded or Failed. Absent means Pending.
	// Succeeded and Failed are final.
	// +optional
	Phase AgentPhase `json:"phase,omitempty"`

	// jobName is the name of the Job running this Agent (agent-job-<name>,
	// shortened with a hash when too long). Empty for a batch run until it
	// falls back to a Job.
	// +optional
	JobName string `json:"jobName,omitempty"`

	// startedAt is when the Job was created or the batch submitted. Batch
	// timeouts and run durations are measured from it.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// completedAt is when the Agent reached Succeeded or Failed. History
	// pruning keeps the newest runs by this time.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`

	// exitCode is the agent process's exit code: always 0 when Succeeded and
	// never 0 when Failed (124 means the run hit its deadline).
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`

	// output is the tail of the run's log (the vendor CLI's event lines and
	// the supervisor's own lines), cut from the front to the controller's
	// MAX_OUTPUT_BYTES with a "...[truncated N bytes]..." marker.
	// +optional
	Output string `json:"output,omitempty"`

	// failureReason says why the run failed or could not start, naming the
	// object or field at fault. A Succeeded run may carry one when its output
	// could not be read back.
	// +optional
	FailureReason string `json:"failureReason,omitempty"`

	// prUrl is kept for compatibility with existing clients; nothing writes it.
	// +optional
	PRURL string `json:"prUrl,omitempty"`

	// batchId is the vendor's id of the batch this run was submitted as. It
	// is kept after a fallback to a Job so the batch can still be cleaned up.
	// +optional
	BatchID string `json:"batchId,omitempty"`

	// batchProvider is the vendor whose batch API holds batchId.
	// +optional
	BatchProvider BatchProvider `json:"batchProvider,omitempty"`

	// batchFallback is true once a timed-out batch run was handed to an
	// ordinary Job (onTimeout: fallback); from then on jobName tracks the run.
	// +optional
	BatchFallback bool `json:"batchFallback,omitempty"`

	// batchCleanupAttempts counts failed attempts to delete this run's batch
	// at the provider. After 5 the finalizer is removed anyway and the
	// provider object is left behind.
	// +optional
	BatchCleanupAttempts int32 `json:"batchCleanupAttempts,omitempty"`

	// sessionId is the vendor session id of a realtime run's conversation,
	// updated when a prompt reveals a new one and read from the log at the
	// end. Pass it as spec.resumeSession of a new Agent to continue.
	// +optional
	SessionID string `json:"sessionId,omitempty"`

	// conditions explain the phase: Resolved (Station and AgentDefinition
	// found and accepted), Started (Job created or batch submitted; False
	// with reason Queued while waiting for a Station slot) and, on runs that
	// continue a conversation, ConversationRestored (True, reason Restored;
	// False, reason RestoreSkipped, when the store could not serve it and
	// the run started a fresh conversation), and, on a run whose init step
	// failed, Initialized (False, reason InitFailed, naming the step).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// Agent is one run of a recipe in a Station. Create one to start a run; the
// agent controller resolves its Station and AgentDefinition, runs it as a
// Job, a vendor batch request or a realtime session, and records the outcome
// in status. Finished Agents are pruned per the Station's history limits.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=agents,singular=agent,shortName=agt,scope=Namespaced,categories=agentplane
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,description="Where the run is: Pending, Running, Succeeded or Failed"
// +kubebuilder:printcolumn:name="Station",type=string,JSONPath=`.spec.stationRef`,description="The Station the run belongs to"
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.status.jobName`,description="The Job running it"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Exit",type=integer,JSONPath=`.status.exitCode`,priority=1,description="Exit code of the agent process"
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model`,priority=1,description="Model override for this run"
// +kubebuilder:selectablefield:JSONPath=`.spec.stationRef`
// +kubebuilder:selectablefield:JSONPath=`.status.phase`
type Agent struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata. Runs are usually created
	// with generateName, e.g. "bug-fixer-run-".
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which Station to run in and with which inputs. Immutable.
	// +required
	Spec AgentSpec `json:"spec"`

	// status is the run's progress and result, written by the controllers.
	// +optional
	Status AgentStatus `json:"status,omitempty"`
}

// CurrentPhase returns the Agent's phase, treating an unset phase as Pending.
func (a *Agent) CurrentPhase() AgentPhase {
	if a.Status.Phase == "" {
		return PhasePending
	}
	return a.Status.Phase
}

// IsTerminal reports whether the Agent has Succeeded or Failed.
func (a *Agent) IsTerminal() bool {
	return a.Status.Phase.IsTerminal()
}

// EffectiveModel returns the model this run uses: the Agent's spec.model,
// else the definition's spec.model, else DefaultModel. def may be nil.
func (a *Agent) EffectiveModel(def *AgentDefinition) string {
	if a.Spec.Model != "" {
		return a.Spec.Model
	}
	if def != nil && def.Spec.Model != "" {
		return def.Spec.Model
	}
	return DefaultModel
}

// +kubebuilder:object:root=true

// AgentList is a list of Agents.
type AgentList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Agents.
	Items []Agent `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Agent{}, &AgentList{})
}
