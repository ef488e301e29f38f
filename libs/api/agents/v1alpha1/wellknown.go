package v1alpha1

// Names shared by the agent controller, the run pod and the tooling. They are
// part of the contract with existing manifests, dashboards and NetworkPolicies,
// so they must not change.
const (
	// BatchCleanupFinalizer is put on an Agent when its batch is submitted to
	// a vendor and removed once the provider-side batch has been cancelled (if
	// still in flight) and deleted, so deleting the Agent cannot leak it.
	BatchCleanupFinalizer = "agents.re-cinq.com/batch-cleanup"

	// MaxBatchCleanupAttempts is how many failed provider cleanups are
	// counted in status.batchCleanupAttempts before the finalizer is removed
	// anyway and the provider object is left behind.
	MaxBatchCleanupAttempts = 5

	// LabelComponent tells which part of the system a pod belongs to:
	// ComponentJob on run pods (the egress NetworkPolicy selects on it) and
	// ComponentController on the controller.
	LabelComponent = "agents.re-cinq.com/component"
	// LabelAgent carries the (length-bounded) name of the Agent on its run pod.
	LabelAgent = "agents.re-cinq.com/agent"
	// LabelStation carries the (length-bounded) name of the Station on a run pod.
	LabelStation = "agents.re-cinq.com/station"
	// LabelExecution carries the ExecutionMode of a run pod; realtime pods are
	// found through it.
	LabelExecution = "agents.re-cinq.com/execution"
	// LabelSystem marks the namespace the platform itself is installed in.
	LabelSystem = "agents.re-cinq.com/system"

	// ComponentJob is the LabelComponent value of run pods.
	ComponentJob = "job"
	// ComponentController is the LabelComponent value of the controller.
	ComponentController = "controller"

	// AgentSecretsName is the one Secret, in the run's namespace, that every
	// secret reference of an AgentDefinition (secrets[].ref, headers_secret,
	// token_secret) names a key of.
	AgentSecretsName = "agent-secrets"

	// AgentContainerName is the container of a Station's pod template that
	// the controller turns into the agent container. The template must have it.
	AgentContainerName = "agent"

	// JobNamePrefix prefixes the Agent name to form the name of its Job.
	JobNamePrefix = "agent-job-"

	// DefaultModel is the model a run uses when neither the Agent nor its
	// AgentDefinition names one.
	DefaultModel = "claude-opus-5-5"
)

// Condition types set on status.conditions of an Agent. The phase remains
// the primary signal; conditions explain why an Agent is where it is.
const (
	// ConditionResolved is True once the Station and AgentDefinition were
	// found and the definition was accepted for its execution mode. When it
	// is False the Agent has failed and the reason says which check refused it.
	ConditionResolved = "Resolved"

	// ConditionStarted is True once the run's Job was created or its batch
	// submitted. It is False with ReasonQueued while the Agent waits in
	// Pending for a free slot of its Station.
	ConditionStarted = "Started"

	// ConditionConversationRestored is set only on runs that continue a
	// conversation (resources.conversation.id, or spec.resumeSession): True
	// with ReasonRestored once the run pod's init step restored it from the
	// store, False with ReasonRestoreSkipped when the store could not serve
	// it and the run started a fresh conversation instead.
	ConditionConversationRestored = "ConversationRestored"

	// ConditionInitialized is set only on a run whose pod's init container
	// failed: False with ReasonInitFailed, the message saying which step
	// failed and why.
	ConditionInitialized = "Initialized"
)

// Condition reasons used with the condition types above.
const (
	// ReasonInitFailed means the run pod's init container (`supervisor
	// init`: clone, skills, conversation restore) exited non-zero, so the
	// agent container never ran.
	ReasonInitFailed = "InitFailed"
	// ReasonResolved means the Station and AgentDefinition were found and accepted.
	ReasonResolved = "Resolved"
	// ReasonStationNotFound means spec.stationRef names no Station in the namespace.
	ReasonStationNotFound = "StationNotFound"
	// ReasonAgentDefinitionNotFound means the Station's agentDefRef names no AgentDefinition.
	ReasonAgentDefinitionNotFound = "AgentDefinitionNotFound"
	// ReasonStationUnreadable means the Station exists but cannot be decoded
	// (a value its type refuses, stored before admission checked it); the
	// message names the field.
	ReasonStationUnreadable = "StationUnreadable"
	// ReasonAgentDefinitionUnreadable means the AgentDefinition exists but
	// cannot be decoded; the message names the field.
	ReasonAgentDefinitionUnreadable = "AgentDefinitionUnreadable"
	// ReasonInvalidDefinition means the AgentDefinition (or the Agent's request,
	// such as resumeSession) cannot run in its execution mode.
	ReasonInvalidDefinition = "InvalidDefinition"
	// ReasonExecutionDisabled means the execution mode is not enabled on this controller.
	ReasonExecutionDisabled = "ExecutionDisabled"
	// ReasonQueued means the Station is at its concurrency limit; the Agent waits.
	ReasonQueued = "Queued"
	// ReasonWaitingForPreviousJob means a Job of the run's name still exists,
	// controlled by an earlier Agent of the same name that was deleted;
	// the Agent waits in Pending until garbage collection removes it.
	ReasonWaitingForPreviousJob = "WaitingForPreviousJob"
	// ReasonJobNameTaken means a Job of the run's name exists that no Agent
	// of that name controls; it is never adopted, and the run failed.
	ReasonJobNameTaken = "JobNameTaken"
	// ReasonJobCreated means the run's Job was created.
	ReasonJobCreated = "JobCreated"
	// ReasonBatchSubmitted means the run was submitted to the vendor batch API.
	ReasonBatchSubmitted = "BatchSubmitted"
	// ReasonBatchFallback means the batch timed out and the run fell back to a Job.
	ReasonBatchFallback = "BatchFallback"
	// ReasonRetrying means starting the run (creating its Job, submitting
	// its batch) failed in a way that may pass (an API server or vendor
	// outage, an exhausted quota); the controller retries with backoff and
	// the message holds the last error.
	ReasonRetrying = "Retrying"
	// ReasonDenied means the cluster refused the run's Job for good (an
	// admission webhook or policy denied it); the run failed.
	ReasonDenied = "Denied"
	// ReasonRestored means the conversation the run continues was restored
	// from its store.
	ReasonRestored = "Restored"
	// ReasonRestoreSkipped means the conversation could not be restored (the
	// store was unreachable, answered non-2xx or served a bad archive, or
	// its header line was unusable) and the run started a fresh one; the
	// message says why.
	ReasonRestoreSkipped = "RestoreSkipped"
)
