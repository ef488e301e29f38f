package agentruntime

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/truncate"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/rollout"
)

// The variant a pod serves, in EnvVariant, so sessions and metrics can be
// told apart during a rollout.
const (
	// EnvVariant is the runtime environment variable naming the variant.
	EnvVariant = "OMNIA_VARIANT"
	// VariantStable is EnvVariant in the stable Deployment's pods.
	VariantStable = "stable"
	// VariantCandidate is EnvVariant in the candidate Deployment's pods.
	VariantCandidate = "candidate"
	// CandidateSuffix ends the candidate Deployment's name: <name>-canary.
	CandidateSuffix = "-canary"
)

// rolloutResult is what the rollout engine decided for this pass.
type rolloutResult struct {
	// Done ends the pass after the status write (the engine wrote the spec).
	Done bool
	// RequeueAfter is the engine's timer (a pause, an analysis, a promotion
	// wait); 0 when none.
	RequeueAfter time.Duration
	// Retry is a missing candidate input. It is returned only after the
	// stable side is applied, so the stable variant keeps serving while
	// controller-runtime retries with backoff.
	Retry error
}

// rollout runs spec.rollout for one pass. It runs before the stable
// Deployment is planned because it decides the stable replica count
// (replica-weighted traffic) and may end the pass after writing the spec
// (a version trigger, entering a promotion).
func (d *decider) rollout(res Resolution, image string, stable *appsv1.Deployment) (rolloutResult, error) {
	if done, err := d.versionTrigger(); done || err != nil {
		return rolloutResult{Done: done}, err
	}
	if d.st.Rollout != nil && d.st.Rollout.Promoting {
		return d.promotion(stable)
	}
	if !rollout.Active(&d.a.Spec) {
		return rolloutResult{}, d.idleRollout()
	}
	return d.activeRollout(res, image, stable)
}

// idleRollout removes what a rollout leaves behind. A finished rollout's
// outcome (promoted, rolled back) stays in status.rollout until the next
// one starts.
func (d *decider) idleRollout() error {
	if err := d.deleteCandidate(); err != nil {
		return err
	}
	st := d.st
	meta.RemoveStatusCondition(&st.Conditions, omniav1.ConditionTrafficRouting)
	if st.Rollout != nil && (st.Rollout.Active || st.Rollout.Promoting) {
		st.Rollout = nil
	}
	c := meta.FindStatusCondition(st.Conditions, omniav1.ConditionRolloutActive)
	switch {
	case d.a.Spec.Rollout == nil && c == nil:
		// An agent that never rolled out carries no rollout condition.
	case c == nil || c.Status != metav1.ConditionFalse || c.Reason != omniav1.ReasonNoActiveRollout:
		d.set(omniav1.ConditionRolloutActive, metav1.ConditionFalse, omniav1.ReasonNoActiveRollout, "no candidate differs from the spec")
	}
	return nil
}

// activeRollout builds the candidate, runs the current step and splits the
// replicas. A step with an analysis asks for its outcome first.
func (d *decider) activeRollout(res Resolution, image string, stable *appsv1.Deployment) (rolloutResult, error) {
	st := d.st
	cfg := d.a.Spec.Rollout
	candVersion := rollout.CandidateVersion(&d.a.Spec)
	prev := rollout.Continuing(st.Rollout, candVersion)
	routing := rollout.ResolveRouting(cfg.TrafficRouting)
	d.routingCondition(routing)
	status := func(dec rollout.Decision, weight int32) {
		st.Rollout = rollout.ActiveStatus(rollout.StatusInput{Prev: prev, Decision: dec, Weight: weight, Routing: routing,
			StableVersion: res.Pack.Spec.Version, CandidateVersion: candVersion, Now: d.t.Time})
	}

	cb := d.buildCandidate(image, res.Tools)
	if cb.err != nil {
		return rolloutResult{}, cb.err
	}
	cand := cb.dep
	if cand == nil {
		// Hold where the rollout is, touching no candidate: the stable side
		// keeps its share and the candidate what it last ran.
		dec := rollout.Decision{Step: rollout.CurrentStep(prev), StepStartedAt: stepStart(prev, d.t), Message: cb.why}
		split := d.planReplicas(routing, rollout.NominalWeight(prev, dec), stable)
		if split.Stable != nil {
			stable.Spec.Replicas = split.Stable
		}
		status(dec, split.Weight)
		d.set(omniav1.ConditionRolloutActive, metav1.ConditionTrue, omniav1.ReasonDegraded, cb.why)
		return rolloutResult{Retry: cb.retry}, nil
	}

	mode := rollout.RollbackMode(cfg)
	live := d.s.live.candidate
	if live.err != nil {
		return rolloutResult{}, live.err
	}
	if sick := rollout.AutoRollback(mode, live.obj); sick != "" {
		return d.rollBack("auto-rollback: " + sick)
	}

	in := rollout.StepInput{Steps: cfg.Steps, Prev: prev, Rollback: mode, Now: d.t.Time}
	dec := rollout.Evaluate(in)
	if dec.Action == rollout.Analyze {
		if d.s.analysis == nil {
			d.p.ask = &question{analysis: cfg.Steps[dec.Step].Analysis}
			return rolloutResult{}, nil
		}
		in.Analysis = d.s.analysis
		dec = rollout.Evaluate(in)
	}
	switch dec.Action {
	case rollout.Promote:
		return d.enterPromotion(func() { status(dec, rollout.NominalWeight(prev, dec)) })
	case rollout.RollBack:
		return d.rollBack("auto-rollback: " + dec.Message)
	}

	split := d.planReplicas(routing, rollout.NominalWeight(prev, dec), stable)
	if split.Stable != nil {
		stable.Spec.Replicas = split.Stable
	}
	if split.Candidate != nil {
		cand.Spec.Replicas = split.Candidate
	}
	// The candidate's own tools file goes first, as the stable one does:
	// its pods mount it.
	if err := d.candidateToolsConfigMap(cb.tools); err != nil {
		return rolloutResult{}, err
	}
	// No HPA targets the candidate: one found at zero (the idle deadline
	// held it there) restarts from a single replica.
	if _, err := d.deployment(cand, live, 1); err != nil {
		return rolloutResult{}, err
	}
	status(dec, split.Weight)
	reason := omniav1.ReasonRolloutInProgress
	if dec.AnalysisFailed {
		reason = omniav1.ReasonAnalysisFailed
	}
	d.set(omniav1.ConditionRolloutActive, metav1.ConditionTrue, reason, dec.Message)
	for _, e := range dec.Events {
		d.emit("Rollout", e.Type, e.Reason, e.Message)
	}
	return rolloutResult{RequeueAfter: dec.RequeueAfter}, nil
}

// rolloutFailed records a failure of the rollout engine in RolloutActive,
// True while a rollout or promotion is under way (in the spec as the
// engine's writes left it), with a Warning event when the failure first
// shows.
func (d *decider) rolloutFailed(err error) {
	status := metav1.ConditionFalse
	if rollout.Active(&d.a.Spec) || d.st.Rollout != nil && d.st.Rollout.Promoting {
		status = metav1.ConditionTrue
	}
	msg := err.Error()
	if d.set(omniav1.ConditionRolloutActive, status, omniav1.ReasonRolloutFailed, msg) {
		d.warn("Rollout", omniav1.EventRolloutFailed, truncate.String(msg, 1024))
	}
}

// stepStart is when the current step began, now for a new rollout.
func stepStart(prev *omniav1.RolloutStatus, t metav1.Time) time.Time {
	if prev != nil && prev.StepStartedAt != nil {
		return prev.StepStartedAt.Time
	}
	return t.Time
}

// planReplicas splits the agent's replicas for a weight. A stable
// Deployment held at zero (the idle deadline, missing capabilities) holds
// the candidate at zero too, and keeps its own count.
func (d *decider) planReplicas(routing rollout.Routing, weight int32, stable *appsv1.Deployment) rollout.Replicas {
	if stable.Spec.Replicas != nil && *stable.Spec.Replicas == 0 {
		return rollout.Replicas{Candidate: ptr(int32(0)), Weight: weight}
	}
	total := int32(1)
	if rt := d.a.Spec.Runtime; rt != nil && rt.Replicas != nil {
		total = *rt.Replicas
	}
	// A stable Deployment built without a count is autoscaled.
	return rollout.PlanReplicas(routing, total, weight, stable.Spec.Replicas == nil)
}

// routingCondition reports a traffic routing request that could not be
// honoured, with a Warning event when that first happens.
func (d *decider) routingCondition(routing rollout.Routing) {
	if routing.Degraded == "" {
		meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionTrafficRouting)
		return
	}
	if d.set(omniav1.ConditionTrafficRouting, metav1.ConditionFalse, omniav1.ReasonDegraded, routing.Degraded) {
		d.warn("Rollout", omniav1.EventTrafficRoutingDegraded, routing.Degraded)
	}
}

// candidateBuild is the candidate Deployment, or why there is none.
type candidateBuild struct {
	// err is an API failure reading the candidate's inputs: a failure of
	// the rollout engine, unlike the spec and input problems below, which
	// hold the rollout.
	err error
	// dep is the desired candidate Deployment; nil when an input is not
	// usable.
	dep *appsv1.Deployment
	// tools is the tool set dep mounts (candidateTools); nil for none.
	tools *ToolSet
	// why says which input, when dep is nil.
	why string
	// retry is the backoff error for a missing object, when dep is nil.
	retry error
}

// buildCandidate resolves the candidate's own inputs — the spec with the
// candidate's overrides — exactly as the stable ones are resolved, and
// builds its Deployment. stableTools is the stable side's tool set: a
// candidate whose tool set is the same mounts the stable tools ConfigMap,
// one whose tool set differs its own (see candidateTools).
func (d *decider) buildCandidate(image string, stableTools *ToolSet) candidateBuild {
	ci := d.s.candidate
	if ci == nil {
		// The snapshot reads the candidate's inputs whenever the spec it
		// read has an active rollout, and only such a spec gets here.
		return candidateBuild{err: fmt.Errorf("AgentRuntime %s/%s: the candidate's inputs were not read", d.a.Namespace, d.a.Name)}
	}
	if ci.err != nil {
		return candidateBuild{err: ci.err}
	}
	// The candidate's conditions are scratch: the agent's conditions
	// describe the stable variant.
	var conds []metav1.Condition
	res := Resolve(ci.in, &conds, d.t)
	if !res.Usable {
		why := "candidate cannot be built"
		for _, typ := range []string{omniav1.ConditionPromptPackReady, omniav1.ConditionSkillsReady, omniav1.ConditionProviderReady} {
			if c := meta.FindStatusCondition(conds, typ); c != nil && c.Status == metav1.ConditionFalse {
				why += ": " + c.Message
				break
			}
		}
		return candidateBuild{why: why, retry: res.Retry}
	}
	res.Tools = candidateTools(res.Tools, stableTools, d.a.Name)
	dep, err := BuildDeployment(ci.in, res, d.s.cfg, image)
	if err != nil {
		return candidateBuild{why: "candidate cannot be built: " + err.Error()}
	}
	asCandidate(dep, d.a.Name)
	return candidateBuild{dep: dep, tools: res.Tools}
}

// asCandidate turns a built Deployment into the candidate: its own name,
// and the canary track in its selector, so the two Deployments never
// adopt each other's pods while the Service (whose selector has no track)
// fronts both.
func asCandidate(d *appsv1.Deployment, agent string) {
	d.Name = agent + CandidateSuffix
	sel := SelectorLabels(agent)
	sel[omniav1.LabelTrack] = omniav1.TrackCanary
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: sel}
	d.Labels[omniav1.LabelTrack] = omniav1.TrackCanary
	d.Spec.Template.Labels[omniav1.LabelTrack] = omniav1.TrackCanary
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		for j := range c.Env {
			if c.Env[j].Name == EnvVariant {
				c.Env[j].Value = VariantCandidate
			}
		}
	}
}

// deleteCandidate plans the delete of the candidate Deployment if this
// agent owns one, then of the candidate's own tools ConfigMap, which its
// pods mounted.
func (d *decider) deleteCandidate() error {
	live := d.s.live.candidate
	if live.err != nil {
		return live.err
	}
	if live.obj != nil && d.controls(live.obj) {
		if o := d.do(write{op: opDelete, obj: live.obj.DeepCopy(), background: true}); client.IgnoreNotFound(o.err) != nil {
			return fmt.Errorf("delete Deployment %s/%s: %w", live.obj.Namespace, live.obj.Name, o.err)
		}
	}
	return d.candidateToolsConfigMap(nil)
}
