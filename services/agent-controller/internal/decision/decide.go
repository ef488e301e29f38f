// Package decision is the agent controller's pure decision code: a function
// from a Snapshot of the world (the Agent, its Station and AgentDefinition,
// its Job and pod, the Station's other runs, the clock) to a Plan, the
// writes that move the Agent along its lifecycle. It does no I/O, so every
// rule is tested with tables, without a server; package controller gathers
// the snapshot and applies the plan.
//
// Decide dispatches once, on the run's execution mode, and each mode's
// rules read top to bottom in one file:
//
//   - job.go: a run carried by a Kubernetes Job, from admission to what
//     its pod says;
//   - batch.go: a run answered by a vendor batch API, its deadline, and
//     its fallback to a Job;
//   - realtime.go: a realtime session, which is a Job run (job.go's
//     startJob and followJob) with a token and a session id.
//
// The pieces they share are named for what they do: snapshot.go (the
// Snapshot and the Plan), transitions.go (refusing, failing and finishing
// a run), admission.go (Station slots, queueing, preemption), restore.go
// (the conversation restore), failures.go (whether a failed start is
// permanent), output.go (the output tail), prune.go (run history) and
// labels.go (what the metrics name a run by).
package decision

import (
	"fmt"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// Decide returns the writes that move s.Agent one step along its lifecycle.
func Decide(s Snapshot) Plan {
	if s.Agent.Status.Phase.IsTerminal() {
		// Terminal → terminal is a no-op.
		return Plan{}
	}
	if s.Agent.Status.Phase != agentsv1alpha1.PhaseRunning {
		// A run not yet started takes its mode from its definition, so both
		// references must resolve first.
		if plan, missing := missingRef(s); missing {
			return plan
		}
	}
	var plan Plan
	switch modeOf(s) {
	case agentsv1alpha1.ExecutionBatch:
		plan = decideBatch(s)
	case agentsv1alpha1.ExecutionRealtime:
		plan = decideRealtime(s)
	default:
		plan = decideJob(s)
	}
	withRunSecrets(s, &plan)
	return plan
}

// withRunSecrets asks for the Secrets the plan's Job mounts, to be written
// before it: the NATS credential of every run Job that publishes (a batch
// fallback's too), and a realtime session's token. A run whose own Job
// exists already (its patch to Running was lost) had them written before
// that Job, so they are not asked for again.
func withRunSecrets(s Snapshot, plan *Plan) {
	if plan.CreateJob == nil || s.PendingWithJob[s.Agent.Name] {
		plan.RunToken = false
		return
	}
	plan.RunCredentials = s.Config.Job.RunCredentials()
}

// missingRef fails a run whose Station or AgentDefinition does not exist.
func missingRef(s Snapshot) (Plan, bool) {
	switch {
	case s.Station == nil:
		return fail(s, fmt.Sprintf("Station %q not found", s.Agent.Spec.StationRef),
			FailureMissingRef, agentsv1alpha1.ReasonStationNotFound), true
	case s.Definition == nil:
		return fail(s, fmt.Sprintf("AgentDefinition %q (spec.agentDefRef of Station %q) not found", s.Station.Spec.AgentDefRef, s.Station.Name),
			FailureMissingRef, agentsv1alpha1.ReasonAgentDefinitionNotFound), true
	}
	return Plan{}, false
}

// modeOf is the execution mode this pass decides under. A run not yet
// started takes its definition's. A started run is known by what it
// carries, not by its definition, which may have changed since: a batch
// (or a batch fallback still waiting for its Job), else its Job, labelled
// when it is a realtime session. A batch run whose fallback Job exists is
// a Job run from then on.
func modeOf(s Snapshot) agentsv1alpha1.ExecutionMode {
	switch {
	case s.Agent.Status.Phase != agentsv1alpha1.PhaseRunning:
		return s.Definition.Spec.EffectiveExecution()
	case followsBatch(s.Agent):
		return agentsv1alpha1.ExecutionBatch
	case s.Job != nil && s.Job.Execution == agentsv1alpha1.ExecutionRealtime:
		return agentsv1alpha1.ExecutionRealtime
	}
	return agentsv1alpha1.ExecutionJob
}

// followsBatch reports whether the Running run a is followed through its
// batch rather than a Job: its batch is in flight, or it timed out into a
// fallback Job not created yet (the Station had no slot).
func followsBatch(a *agentsv1alpha1.Agent) bool {
	return IsBatchRun(a) || (a.Status.BatchFallback && a.Status.JobName == "")
}

// NeedsJob reports whether a reconcile of a in this phase reads its Job:
// a Running run tracked through its Job (not its batch, and not a
// fallback still waiting for a Station slot).
func NeedsJob(a *agentsv1alpha1.Agent) bool {
	return a.Status.Phase == agentsv1alpha1.PhaseRunning && !followsBatch(a)
}
