package decision

import (
	"fmt"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/prompt"
	"github.com/agentplane/agentplane/libs/vendors"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// A batch run sends its prompt to the vendor's batch API through
// batch-poller, with no pod. A Pending run is checked, admitted to a slot
// of its Station like any run, and submitted; the patch to Running makes
// agent/started due. A Running run waits for batch-poller's report: a
// result ends it (agent/succeeded or agent/failed). At its deadline
// (startedAt + batch.timeoutMinutes) a result reported in the same pass
// still wins; otherwise onTimeout fail ends the run, and onTimeout
// fallback runs it as an ordinary Job, created once the Station has a slot
// (batch_timeout either way). From the moment that Job exists the run is
// a Job run (job.go). The provider-side batch is deleted once done with,
// behind a finalizer.

// Reasons a batch run is refused or ends with, besides ValidateBatch's and
// the vendor's own.
const (
	// ReasonBatchDisabled refuses a batch run on a controller running
	// without the batch component.
	ReasonBatchDisabled = "batch execution is disabled on this controller"
	// ReasonBatchTimedOut is the failure reason of a batch run that timed
	// out under onTimeout: fail.
	ReasonBatchTimedOut = "batch timed out"
)

// decideBatch is one pass over a batch run.
func decideBatch(s Snapshot) Plan {
	switch {
	case s.Agent.Status.Phase != agentsv1alpha1.PhaseRunning:
		return submitBatch(s)
	case IsBatchRun(s.Agent):
		return followBatch(s)
	default:
		// It timed out into a fallback Job the Station had no slot for:
		// the Job is created once a slot frees.
		return fallbackJob(s, s.Agent.Status.DeepCopy(), Plan{})
	}
}

// submitBatch refuses a definition that cannot run as a batch here, else
// admits the run and submits it, with the status patch to Running.
func submitBatch(s Snapshot) Plan {
	a, def := s.Agent, &s.Definition.Spec
	model := a.EffectiveModel(s.Definition)
	if reason := ValidateBatch(def, model); reason != "" {
		return refuseInvalid(s, reason)
	}
	if !s.Config.BatchEnabled {
		return refuseDisabled(s, ReasonBatchDisabled)
	}
	if a.Spec.ResumeSession != "" {
		return refuseInvalid(s, ReasonResumeNeedsRealtime)
	}
	if reason := promptRefusal(s); reason != "" {
		return refuseInvalid(s, reason)
	}
	if def.Batch.EffectiveOnTimeout() == agentsv1alpha1.OnTimeoutFallback {
		// The fallback Job runs the vendor CLI, with its tool rules.
		if reason := toolRuleRefusal(s); reason != "" {
			return refuseInvalid(s, reason)
		}
	}
	// A batch run has no Job that could hold a slot already.
	plan, ok := admit(s, false)
	if !ok {
		return plan
	}
	rendered, err := prompt.Render(def.Prompt, a.Spec.Parameters)
	if err != nil {
		// promptRefusal counted the same size; kept so that no path
		// renders past the cap.
		return refuseInvalid(s, err.Error())
	}
	provider := ProviderFor(model)
	sub := &BatchSubmit{
		Model:     model,
		Prompt:    rendered,
		MaxTokens: def.Batch.EffectiveMaxTokens(),
		APIKeyKey: APIKeyKey(def, provider),
		Provider:  provider,
	}
	if def.Output != nil && def.Output.Schema != nil {
		sub.OutputSchema = string(def.Output.Schema.Raw)
	}
	st := a.Status.DeepCopy()
	st.BatchProvider = provider
	start(&plan, s, st, agentsv1alpha1.ReasonBatchSubmitted, "submitted to the "+string(provider)+" batch API", nil)
	plan.Submit = sub
	plan.Notice = NoticeStarted
	return plan
}

// followBatch moves a Running batch run on: a reported result wins,
// even in the pass that reaches the deadline; otherwise the deadline
// applies onTimeout; otherwise it waits.
func followBatch(s Snapshot) Plan {
	a := s.Agent
	st := a.Status.DeepCopy()
	if b := s.Batch; b != nil && b.State != BatchPending {
		output := TailOutput(strings.Join(b.Lines, "\n"), s.Config.MaxOutputBytes)
		var plan Plan
		if b.State == BatchSucceeded {
			plan = finish(s, st, agentsv1alpha1.PhaseSucceeded, 0, output, "", "")
		} else {
			reason := b.FailureMessage
			if reason == "" {
				reason = "the batch ended without an answer"
			}
			plan = finish(s, st, agentsv1alpha1.PhaseFailed, 1, output, reason, FailureJobFailed)
		}
		plan.Notice = NoticeFinished
		return plan
	}
	deadline := BatchDeadline(a, s.Definition, s.Config.batchUnit())
	if s.Now.Before(deadline) || s.Batch == nil {
		// Not due, or the driver did not ask this pass: look again at the
		// next poll or the deadline, whichever is first.
		// Past the deadline without an answer (the driver could not ask),
		// look again soon, never "now": a zero or negative wait would spin.
		return Plan{RequeueAfter: min(s.Config.batchPoll(), max(deadline.Sub(s.Now), minRequeue))}
	}
	var def *agentsv1alpha1.BatchSpec
	if s.Definition != nil {
		def = s.Definition.Spec.Batch
	}
	timedOut := fmt.Sprintf("batch %s timed out after %d minutes", a.Status.BatchID, def.EffectiveTimeoutMinutes())
	if def.EffectiveOnTimeout() == agentsv1alpha1.OnTimeoutFail || s.Definition == nil {
		plan := finish(s, st, agentsv1alpha1.PhaseFailed, 1, "", ReasonBatchTimedOut, FailureJobFailed)
		plan.Notice = NoticeTimeout
		plan.Events = append([]Event{newEvent(corev1.EventTypeWarning, EventBatchTimeout, actionFinish, timedOut+"; the run fails (onTimeout fail)")}, plan.Events...)
		return plan
	}
	st.BatchFallback = true
	st.ObservedGeneration = a.Generation
	setCondition(st, s, agentsv1alpha1.ConditionStarted, metav1.ConditionTrue, agentsv1alpha1.ReasonBatchFallback,
		fmt.Sprintf("batch timed out after %d minutes; running as a Job", def.EffectiveTimeoutMinutes()))
	plan := Plan{Status: st, Notice: NoticeTimeout,
		Events: []Event{newEvent(corev1.EventTypeWarning, EventBatchTimeout, actionFinish, timedOut+"; the run falls back to a Job (onTimeout fallback)")}}
	return fallbackJob(s, st, plan)
}

// fallbackJob creates the fallback Job when the Station has a slot for it;
// otherwise the run waits in Running, holding its plan's status. It does
// not preempt.
func fallbackJob(s Snapshot, st *agentsv1alpha1.AgentStatus, plan Plan) Plan {
	if s.Station == nil || s.Definition == nil {
		// The Job cannot be built without them; fail as a Pending run would.
		reason := fmt.Sprintf("Station %q or its AgentDefinition not found for the fallback Job", s.Agent.Spec.StationRef)
		p := finish(s, st, agentsv1alpha1.PhaseFailed, 1, "", reason, FailureMissingRef)
		p.Notice, p.Events = plan.Notice, append(plan.Events, p.Events...)
		return p
	}
	if s.NameTaken != nil {
		p := jobNameTaken(s, st)
		if p.Status == nil {
			// Waiting for a predecessor's Job to go: keep this pass's
			// status (the timeout) and look again.
			plan.RequeueAfter = p.RequeueAfter
			return plan
		}
		p.Notice, p.Events = plan.Notice, append(plan.Events, p.Events...)
		return p
	}
	if !hasSlot(s) {
		return plan
	}
	job, err := jobbuild.Build(jobbuild.Input{
		Agent: s.Agent, Station: s.Station, Definition: s.Definition,
		Model: s.Agent.EffectiveModel(s.Definition), Config: s.Config.Job,
	})
	if err != nil {
		p := finish(s, st, agentsv1alpha1.PhaseFailed, 1, "", err.Error(), FailureJobFailed)
		p.Notice, p.Events = plan.Notice, append(plan.Events, p.Events...)
		return p
	}
	st.JobName = job.Name
	plan.Status = st
	plan.CreateJob = job
	created := newEvent(corev1.EventTypeNormal, EventJobCreated, actionCreate, "Job "+job.Name+" created: the batch run falls back to a Job")
	created.Related = jobRef(job.Namespace, job.Name)
	plan.Events = append(plan.Events, created)
	return plan
}

// apiKeyVars is the environment variable each batch provider's key is
// known by; a recipe maps it to a key of agent-secrets in
// resources.secrets, as it would for a Job run.
var apiKeyVars = map[agentsv1alpha1.BatchProvider]string{
	agentsv1alpha1.BatchProviderAnthropic: "ANTHROPIC_API_KEY",
	agentsv1alpha1.BatchProviderOpenAI:    "OPENAI_API_KEY",
	agentsv1alpha1.BatchProviderGemini:    "GEMINI_API_KEY",
}

// ProviderFor returns the batch API a model's vendor offers, or "" when its
// vendor has none (OpenCode, exec).
func ProviderFor(model string) agentsv1alpha1.BatchProvider {
	switch vendors.Route(model).Name() {
	case vendors.NameClaude:
		return agentsv1alpha1.BatchProviderAnthropic
	case vendors.NameCodex:
		return agentsv1alpha1.BatchProviderOpenAI
	case vendors.NameGemini:
		return agentsv1alpha1.BatchProviderGemini
	}
	return ""
}

// ValidateBatch returns why a definition cannot run as a batch, or "". A
// batch is one prompt answered by the model, with no pod: anything that
// needs the run pod (a workspace, a CLI's tools, its files) cannot be
// honoured, and saying so beats silently dropping it.
func ValidateBatch(def *agentsv1alpha1.AgentDefinitionSpec, model string) string {
	if ProviderFor(model) == "" {
		return fmt.Sprintf("batch execution needs a model with a vendor batch API (Anthropic, OpenAI or Gemini); model %q runs %s", model, vendors.Route(model).Name())
	}
	if r := def.Resources; r != nil {
		switch {
		case len(r.Repos) > 0:
			return "batch execution cannot clone resources.repos: a batch run has no workspace"
		case len(r.MCPServers) > 0:
			return "batch execution cannot use resources.mcp_servers: a batch run has no agent CLI"
		case len(r.Skills) > 0 || r.SkillsSource != "":
			return "batch execution cannot install resources.skills: a batch run has no agent CLI"
		case r.Conversation != nil:
			return "batch execution cannot restore or save resources.conversation"
		}
	}
	if o := def.Output; o != nil {
		if len(o.Watch) > 0 {
			return "batch execution cannot watch output.watch files: a batch run writes no files"
		}
		for i, s := range o.Sinks {
			switch {
			case s.Type == agentsv1alpha1.SinkType("file"):
				return fmt.Sprintf("batch execution cannot write output.sinks[%d] (type file): a batch run has no pod to write it in", i)
			case s.HeadersSecret != "":
				return fmt.Sprintf("batch execution cannot send output.sinks[%d].headers_secret: the controller does not read agent-secrets", i)
			}
		}
	}
	return ""
}

// APIKeyKey is the agent-secrets key the recipe maps the provider's key
// variable to, else the variable's own name.
func APIKeyKey(def *agentsv1alpha1.AgentDefinitionSpec, p agentsv1alpha1.BatchProvider) string {
	name := apiKeyVars[p]
	if def.Resources != nil {
		for _, s := range def.Resources.Secrets {
			if s.Name == name && s.Ref != "" {
				return s.Ref
			}
		}
	}
	return name
}

// SubmitRefused is the plan when batch-poller refuses a submit in a way a
// retry would not change (a bad request, a missing API key): the run fails
// with its message instead of staying Pending.
func SubmitRefused(s Snapshot, reason string) Plan {
	return refuseInvalid(s, reason)
}

// IsBatchRun reports whether a is a batch run still tracked through its
// batch, not (yet) through a fallback Job.
func IsBatchRun(a *agentsv1alpha1.Agent) bool {
	return a.Status.BatchID != "" && !a.Status.BatchFallback
}

// DefaultBatchPoll is BATCH_POLL_SECONDS's default.
const DefaultBatchPoll = 60 * time.Second

// batchPoll is the poll period, DefaultBatchPoll when unset.
func (c Config) batchPoll() time.Duration {
	if c.BatchPoll <= 0 {
		return DefaultBatchPoll
	}
	return c.BatchPoll
}

// batchUnit is what one batch.timeoutMinutes counts, a minute when unset.
func (c Config) batchUnit() time.Duration {
	if c.BatchTimeoutUnit <= 0 {
		return time.Minute
	}
	return c.BatchTimeoutUnit
}

// minRequeue is the shortest wait a plan asks for.
const minRequeue = time.Second

// BatchDeadline is when a's batch times out under def: timeoutMinutes
// after startedAt. def may be nil (the recipe is gone): the defaults apply.
func BatchDeadline(a *agentsv1alpha1.Agent, def *agentsv1alpha1.AgentDefinition, unit time.Duration) time.Time {
	var b *agentsv1alpha1.BatchSpec
	if def != nil {
		b = def.Spec.Batch
	}
	start := a.CreationTimestamp.Time
	if a.Status.StartedAt != nil {
		start = a.Status.StartedAt.Time
	}
	return start.Add(scaled(b.EffectiveTimeoutMinutes(), unit))
}

// scaled is n units, saturating at the longest time.Duration instead of
// wrapping negative: a huge timeoutMinutes (admission bounds it, older
// objects may predate the bound) means "far away", never "already past".
func scaled(n int64, unit time.Duration) time.Duration {
	if n <= 0 || unit <= 0 {
		return 0
	}
	if n > int64(math.MaxInt64/unit) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(n) * unit
}

// BatchDue reports whether a pass over a Running batch run should ask
// batch-poller: at most once per poll period since the last ask, unless a
// completion notice arrived or the deadline is reached (the pass that
// times out must first learn whether the result came in).
func BatchDue(lastAsked, now, deadline time.Time, period time.Duration, noticed bool) bool {
	return lastAsked.IsZero() || noticed || !now.Before(deadline) || now.Sub(lastAsked) >= period
}

// NeedsBatchCleanup reports whether a's provider-side batch must still be
// deleted: it carries the finalizer and its batch is done with (recorded,
// timed out, or the Agent is being deleted).
func NeedsBatchCleanup(a *agentsv1alpha1.Agent) bool {
	if !HasBatchFinalizer(a) {
		return false
	}
	return a.DeletionTimestamp != nil || a.Status.Phase.IsTerminal() || a.Status.BatchFallback
}

// HasBatchFinalizer reports whether a carries the batch-cleanup finalizer.
func HasBatchFinalizer(a *agentsv1alpha1.Agent) bool {
	for _, f := range a.Finalizers {
		if f == agentsv1alpha1.BatchCleanupFinalizer {
			return true
		}
	}
	return false
}

// CleanupFailed is the decision after a failed cleanup attempt: the new
// status.batchCleanupAttempts, and whether to give up and remove the
// finalizer anyway, leaving the provider object behind.
func CleanupFailed(attempts int32) (next int32, giveUp bool) {
	next = attempts + 1
	return next, next >= agentsv1alpha1.MaxBatchCleanupAttempts
}
