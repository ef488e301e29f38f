package agentruntime

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
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
// Deployment is applied because it decides the stable replica count
// (replica-weighted traffic) and may end the pass after writing the spec
// (a version trigger, entering a promotion).
func (r *Reconciler) rollout(ctx context.Context, a *omniav1.AgentRuntime, in Inputs, res Resolution, image string, stable *appsv1.Deployment, st *omniav1.AgentRuntimeStatus, t metav1.Time) (rolloutResult, error) {
	if done, err := r.versionTrigger(ctx, a, in); done || err != nil {
		return rolloutResult{Done: done}, err
	}
	if st.Rollout != nil && st.Rollout.Promoting {
		return r.promotion(ctx, a, stable, st, t)
	}
	if !rollout.Active(&a.Spec) {
		return rolloutResult{}, r.idleRollout(ctx, a, st, t)
	}
	return r.activeRollout(ctx, a, res, image, stable, st, t)
}

// idleRollout removes what a rollout leaves behind. A finished rollout's
// outcome (promoted, rolled back) stays in status.rollout until the next
// one starts.
func (r *Reconciler) idleRollout(ctx context.Context, a *omniav1.AgentRuntime, st *omniav1.AgentRuntimeStatus, t metav1.Time) error {
	if err := r.deleteCandidate(ctx, a); err != nil {
		return err
	}
	meta.RemoveStatusCondition(&st.Conditions, omniav1.ConditionTrafficRouting)
	if st.Rollout != nil && (st.Rollout.Active || st.Rollout.Promoting) {
		st.Rollout = nil
	}
	c := meta.FindStatusCondition(st.Conditions, omniav1.ConditionRolloutActive)
	switch {
	case a.Spec.Rollout == nil && c == nil:
		// An agent that never rolled out carries no rollout condition.
	case c == nil || c.Status != metav1.ConditionFalse || c.Reason != omniav1.ReasonNoActiveRollout:
		kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionRolloutActive, metav1.ConditionFalse,
			omniav1.ReasonNoActiveRollout, "no candidate differs from the spec")
	}
	return nil
}

// activeRollout builds the candidate, runs the current step and splits the
// replicas.
func (r *Reconciler) activeRollout(ctx context.Context, a *omniav1.AgentRuntime, res Resolution, image string, stable *appsv1.Deployment, st *omniav1.AgentRuntimeStatus, t metav1.Time) (rolloutResult, error) {
	cfg := a.Spec.Rollout
	candVersion := rollout.CandidateVersion(&a.Spec)
	prev := rollout.Continuing(st.Rollout, candVersion)
	routing := rollout.ResolveRouting(cfg.TrafficRouting)
	r.routingCondition(a, st, routing, t)
	status := func(d rollout.Decision, weight int32) {
		st.Rollout = rollout.ActiveStatus(rollout.StatusInput{Prev: prev, Decision: d, Weight: weight, Routing: routing,
			StableVersion: res.Pack.Spec.Version, CandidateVersion: candVersion, Now: t.Time})
	}

	cb, err := r.buildCandidate(ctx, a, image, t)
	if err != nil {
		return rolloutResult{}, err
	}
	cand := cb.dep
	if cand == nil {
		// Hold where the rollout is, touching no candidate: the stable side
		// keeps its share and the candidate what it last ran.
		d := rollout.Decision{Step: rollout.CurrentStep(prev), StepStartedAt: stepStart(prev, t), Message: cb.why}
		plan := r.planReplicas(a, routing, rollout.NominalWeight(prev, d), stable)
		if plan.Stable != nil {
			stable.Spec.Replicas = plan.Stable
		}
		status(d, plan.Weight)
		kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionRolloutActive, metav1.ConditionTrue, omniav1.ReasonDegraded, cb.why)
		return rolloutResult{Retry: cb.retry}, nil
	}

	mode := rollout.RollbackMode(cfg)
	live := &appsv1.Deployment{}
	found, err := r.get(ctx, a.Namespace, cand.Name, live)
	if err != nil {
		return rolloutResult{}, err
	}
	if !found {
		live = nil
	}
	if sick := rollout.AutoRollback(mode, live); sick != "" {
		return r.rollBack(ctx, a, st, t, "auto-rollback: "+sick)
	}

	in := rollout.StepInput{Steps: cfg.Steps, Prev: prev, Rollback: mode, Now: t.Time}
	d := rollout.Evaluate(in)
	if d.Action == rollout.Analyze {
		in.Analysis = r.runAnalysis(ctx, a, cfg.Steps[d.Step].Analysis)
		d = rollout.Evaluate(in)
	}
	switch d.Action {
	case rollout.Promote:
		return r.enterPromotion(ctx, a, st, t, func() { status(d, rollout.NominalWeight(prev, d)) })
	case rollout.RollBack:
		return r.rollBack(ctx, a, st, t, "auto-rollback: "+d.Message)
	}

	plan := r.planReplicas(a, routing, rollout.NominalWeight(prev, d), stable)
	if plan.Stable != nil {
		stable.Spec.Replicas = plan.Stable
	}
	if plan.Candidate != nil {
		cand.Spec.Replicas = plan.Candidate
	}
	// No HPA targets the candidate: one found at zero (the idle deadline
	// held it there) restarts from a single replica.
	if _, err := r.applyDeployment(ctx, a, cand, 1); err != nil {
		return rolloutResult{}, err
	}
	status(d, plan.Weight)
	reason := omniav1.ReasonRolloutInProgress
	if d.AnalysisFailed {
		reason = omniav1.ReasonAnalysisFailed
	}
	kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionRolloutActive, metav1.ConditionTrue, reason, d.Message)
	kubeutil.Emit(r.Recorder, a, "Rollout", d.Events)
	return rolloutResult{RequeueAfter: d.RequeueAfter}, nil
}

// rolloutFailed records a failure of the rollout engine in RolloutActive,
// True while a rollout or promotion is under way, with a Warning event
// when the failure first shows.
func (r *Reconciler) rolloutFailed(a *omniav1.AgentRuntime, st *omniav1.AgentRuntimeStatus, err error, t metav1.Time) {
	status := metav1.ConditionFalse
	if rollout.Active(&a.Spec) || st.Rollout != nil && st.Rollout.Promoting {
		status = metav1.ConditionTrue
	}
	msg := err.Error()
	if kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionRolloutActive, status, omniav1.ReasonRolloutFailed, msg) {
		kubeutil.Emit(r.Recorder, a, "Rollout", []kubeutil.Event{{Type: corev1.EventTypeWarning, Reason: omniav1.EventRolloutFailed, Message: kubeutil.Truncate(msg, 1024)}})
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
func (r *Reconciler) planReplicas(a *omniav1.AgentRuntime, routing rollout.Routing, weight int32, stable *appsv1.Deployment) rollout.Replicas {
	if stable.Spec.Replicas != nil && *stable.Spec.Replicas == 0 {
		return rollout.Replicas{Candidate: ptr(int32(0)), Weight: weight}
	}
	total := int32(1)
	if rt := a.Spec.Runtime; rt != nil && rt.Replicas != nil {
		total = *rt.Replicas
	}
	// A stable Deployment built without a count is autoscaled.
	return rollout.PlanReplicas(routing, total, weight, stable.Spec.Replicas == nil)
}

// routingCondition reports a traffic routing request that could not be
// honoured, with a Warning event when that first happens.
func (r *Reconciler) routingCondition(a *omniav1.AgentRuntime, st *omniav1.AgentRuntimeStatus, routing rollout.Routing, t metav1.Time) {
	if routing.Degraded == "" {
		meta.RemoveStatusCondition(&st.Conditions, omniav1.ConditionTrafficRouting)
		return
	}
	if kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionTrafficRouting, metav1.ConditionFalse, omniav1.ReasonDegraded, routing.Degraded) {
		kubeutil.Emit(r.Recorder, a, "Rollout", []kubeutil.Event{{Type: corev1.EventTypeWarning, Reason: omniav1.EventTrafficRoutingDegraded, Message: routing.Degraded}})
	}
}

// candidateBuild is the candidate Deployment, or why there is none.
type candidateBuild struct {
	// dep is the desired candidate Deployment; nil when an input is not
	// usable.
	dep *appsv1.Deployment
	// why says which input, when dep is nil.
	why string
	// retry is the backoff error for a missing object, when dep is nil.
	retry error
}

// buildCandidate resolves the candidate's own inputs — the spec with the
// candidate's overrides — exactly as the stable ones are resolved, and
// builds its Deployment.
func (r *Reconciler) buildCandidate(ctx context.Context, a *omniav1.AgentRuntime, image string, t metav1.Time) (candidateBuild, error) {
	ca := a.DeepCopy()
	ca.Spec = *rollout.CandidateSpec(&a.Spec)
	in, err := r.inputs(ctx, ca)
	if err != nil {
		return candidateBuild{}, err
	}
	// The candidate's conditions are scratch: the agent's conditions
	// describe the stable variant.
	var conds []metav1.Condition
	res := Resolve(in, &conds, t)
	if !res.Usable {
		why := "candidate cannot be built"
		for _, typ := range []string{omniav1.ConditionPromptPackReady, omniav1.ConditionProviderReady} {
			if c := meta.FindStatusCondition(conds, typ); c != nil && c.Status == metav1.ConditionFalse {
				why += ": " + c.Message
				break
			}
		}
		return candidateBuild{why: why, retry: res.Retry}, nil
	}
	d, err := BuildDeployment(in, res, r.Config, image)
	if err != nil {
		return candidateBuild{why: "candidate cannot be built: " + err.Error()}, nil
	}
	asCandidate(d, a.Name)
	return candidateBuild{dep: d}, nil
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

// deleteCandidate removes the candidate Deployment if this agent owns one.
func (r *Reconciler) deleteCandidate(ctx context.Context, a *omniav1.AgentRuntime) error {
	d := &appsv1.Deployment{}
	found, err := r.get(ctx, a.Namespace, a.Name+CandidateSuffix, d)
	if err != nil || !found || !metav1.IsControlledBy(d, a) {
		return err
	}
	if err := r.Client.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return nil
}
