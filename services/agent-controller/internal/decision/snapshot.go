package decision

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// This file holds what a decision reads (Snapshot) and what it returns
// (Plan); the rules are in the mode files.

// Config is the controller configuration the decisions depend on.
type Config struct {
	// MaxOutputBytes caps status.output.
	MaxOutputBytes int
	// BatchEnabled is set when the controller runs with the batch component.
	BatchEnabled bool
	// BatchPoll is how often a Running batch run is looked at
	// (BATCH_POLL_SECONDS); default DefaultBatchPoll.
	BatchPoll time.Duration
	// BatchTimeoutUnit is what one batch.timeoutMinutes counts; a minute
	// unless tests shorten it.
	BatchTimeoutUnit time.Duration
	// RealtimeEnabled is set when the controller runs with the realtime component.
	RealtimeEnabled bool
	// Job is passed to the Job builder.
	Job jobbuild.Config
}

// Snapshot is everything one decision reads.
type Snapshot struct {
	Now   time.Time
	Agent *agentsv1alpha1.Agent
	// Station and Definition are nil when not found.
	Station    *agentsv1alpha1.Station
	Definition *agentsv1alpha1.AgentDefinition
	// Job is the run's Job, nil when it does not exist: the Job of the
	// run's name controlled by this Agent's uid (IsRunJob), never another.
	Job *RunJob
	// NameTaken is a Job of the run's name that this Agent does not
	// control (identity.go); nil when there is none or it was not looked
	// for. It is never read for a result.
	NameTaken *RunJob
	// Pod is read once the Job is finished, and while it runs only for
	// its init log (ReadsInitLog).
	Pod PodOutcome
	// Batch is what batch-poller reported for a Running batch run in this
	// pass; nil when it was not asked (not due).
	Batch *BatchOutcome
	// StationRuns are the cached Agents of the same Station, this one
	// included or not.
	StationRuns []*agentsv1alpha1.Agent
	// InFlight counts this Station's runs admitted by this controller but
	// not yet seen in the cache holding their slot (Running, or Pending
	// with a Job), so a burst never over-admits.
	InFlight int
	// PendingWithJob names the Station's Pending Agents, this one included,
	// whose Job exists (owned by that Agent): the Job was created but the
	// patch to Running was lost (a conflict, a crash). The Job runs all the
	// same, so such a run holds a slot.
	PendingWithJob map[string]bool
	Config         Config
}

// PodOutcome is what was read back from a finished run's pod; for a run
// still going, only Restore, when ReadsInitLog asked for it.
type PodOutcome struct {
	// Found is false when the pod was already garbage-collected.
	Found bool
	// ExitCode is the agent container's terminated exit code, if recorded.
	ExitCode *int32
	// Log is the agent container's log tail.
	Log string
	// LogDropped counts the log's bytes before Log, discarded while it
	// was read (the controller keeps only what status.output can hold).
	LogDropped int64
	// LogErr is set when the pod exists but its log could not be read.
	LogErr error
	// Restore is what the init container's log says about the conversation
	// restore; read only when ReadsInitLog says so, zero otherwise.
	Restore RestoreOutcome
	// InitFailed is set, once the Job finished, when an init container of
	// the pod terminated non-zero: the agent container never ran, so
	// ExitCode and Log are empty.
	InitFailed *InitFailure
	// Summary is the sum of the delivery summaries the pod's supervisor
	// left in the termination messages of its init and agent containers,
	// once the Job finished; nil when neither left one.
	Summary *runspec.Summary
}

// BatchState is where a submitted batch stands, as batch-poller reports it.
type BatchState int

// Batch states.
const (
	// BatchPending is a batch still in flight at the vendor.
	BatchPending BatchState = iota + 1
	// BatchSucceeded is a batch that ended with an answer.
	BatchSucceeded
	// BatchFailed is a batch that ended without a usable answer.
	BatchFailed
)

// BatchOutcome is what batch-poller reported for a Running batch run.
type BatchOutcome struct {
	State BatchState
	// Lines are the vendor CLI's event lines built from the response.
	Lines []string
	// FailureMessage is the failed request's message.
	FailureMessage string
}

// Plan is the writes one reconcile makes, in order: delete preempted
// Agents, submit the batch or create the Job, patch the status (with the
// Agent's resourceVersion as precondition), then send the notice's sink
// events and prune history.
type Plan struct {
	Preempt []Victim
	// Submit asks batch-poller to submit the run before the status patch.
	Submit *BatchSubmit
	// RunToken asks for the realtime run's token Secret before its Job.
	RunToken bool
	// RunCredentials asks for the run's NATS credential Secret before
	// its Job, which mounts it (jobbuild.Config.RunCredentials).
	RunCredentials bool
	CreateJob      *batchv1.Job
	// Status is the complete new status; nil means no patch.
	Status *agentsv1alpha1.AgentStatus
	// Prune asks the driver to prune the Station's history after the patch.
	Prune bool
	// Notice names the sink events due once the status patch succeeded.
	Notice Notice
	// Events are the Kubernetes Events about the Agent to record, in
	// order, once the status patch succeeded (see events.go).
	Events []Event
	// RequeueAfter asks for another look at the Agent after this long; it
	// is not a write.
	RequeueAfter time.Duration
	Outcome      Outcome
}

// Empty reports whether the plan writes nothing.
func (p Plan) Empty() bool {
	return len(p.Preempt) == 0 && p.Submit == nil && p.CreateJob == nil && p.Status == nil && !p.Prune
}

// Victim is an Agent to delete, with the resourceVersion it was judged at,
// used as a delete precondition.
type Victim struct {
	Name            string
	UID             types.UID
	ResourceVersion string
	// Event is recorded about the victim once its delete succeeded.
	Event Event
}

// BatchSubmit is what the driver submits to batch-poller. The returned batch
// id and provider go into Plan.Status before it is patched.
type BatchSubmit struct {
	Model        string
	Prompt       string
	MaxTokens    int64
	OutputSchema string
	// APIKeyKey is the agent-secrets key holding the vendor API key.
	APIKeyKey string
	Provider  agentsv1alpha1.BatchProvider
}

// Notice names the sink events a plan's patch makes due; the driver sends
// them after the patch succeeds, and never otherwise.
type Notice int

// Notices.
const (
	// NoticeNone sends nothing.
	NoticeNone Notice = iota
	// NoticeStarted sends agent/started (after the submit patch).
	NoticeStarted
	// NoticeFinished sends the CLI lines, then agent/succeeded or
	// agent/failed (after the completing patch).
	NoticeFinished
	// NoticeTimeout sends the batch_timeout lifecycle event: status failed
	// under onTimeout fail, running under fallback.
	NoticeTimeout
)

// Outcome describes what a plan does, for metrics and logs.
type Outcome struct {
	// Started is set when a run starts; QueueWait is creation → start.
	Started   bool
	QueueWait time.Duration
	// Mode is how the started run runs: job, batch or realtime. A batch
	// run's fallback Job starts no new run.
	Mode agentsv1alpha1.ExecutionMode
	// Queued is set when the run waits for a Station slot.
	Queued bool
	// Terminal is the phase reached, if any.
	Terminal agentsv1alpha1.AgentPhase
	ExitCode int32
	// Duration is startedAt → the terminal patch; zero when never started.
	Duration time.Duration
	// Failure is the kind of reason the run ended with, if any.
	Failure FailureKind
	// Preempted counts Agents deleted under the Replace policy.
	Preempted int
	// Summary is what the finished run's pod said it delivered (PodOutcome),
	// counted with the terminal transition; nil for a run without a pod
	// read back.
	Summary *runspec.Summary
}

// FailureKind groups runs that ended with a reason, so the failure metric
// has few series.
type FailureKind string

// Failure kinds.
const (
	// FailureMissingRef is a run whose Station or AgentDefinition is gone.
	FailureMissingRef FailureKind = "missing_ref"
	// FailureJobFailed is a run that ran and failed (a Job or a batch).
	FailureJobFailed FailureKind = "job_failed"
	// FailureOutputUnavailable is a run whose result could not be read
	// back: its Job or pod garbage-collected, or its log unreadable.
	FailureOutputUnavailable FailureKind = "output_unavailable"
	// FailurePreempted is a run deleted to make room under Replace.
	FailurePreempted FailureKind = "preempted"
	// FailureInvalidSpec is a run refused before it started because its
	// Station, AgentDefinition or execution settings cannot run.
	FailureInvalidSpec FailureKind = "invalid_spec"
)

// FailureKinds are every FailureKind, the label values of the failure
// metric.
var FailureKinds = []FailureKind{FailureMissingRef, FailureJobFailed, FailureOutputUnavailable, FailurePreempted, FailureInvalidSpec}
