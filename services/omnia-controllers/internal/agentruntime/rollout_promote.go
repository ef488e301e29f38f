package agentruntime

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/promptpack"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/rollout"
)

// This file holds the rollout's spec writes: a version trigger starting a
// rollout, a promotion making the candidate the spec, and a rollback
// making the candidate the spec's again.

// versionTrigger sets a candidate when spec.rollout.trigger sees a newer
// version on its channel. It reports whether it wrote the spec; the write
// brings the agent back through its own watch.
func (r *Reconciler) versionTrigger(ctx context.Context, a *omniav1.AgentRuntime, in Inputs) (bool, error) {
	ro := a.Spec.Rollout
	if ro == nil || ro.Trigger == nil {
		return false, nil
	}
	ch := ro.Trigger.PromptPackChannel
	latest := ""
	if p := promptpack.ChannelMax(in.Packs, ch); p != nil {
		latest = p.Spec.Version
	}
	ref := rollout.Trigger(a, latest)
	if ref == nil {
		return false, nil
	}
	if err := r.updateSpec(ctx, a, func(u *omniav1.AgentRuntime) {
		u.Spec.Rollout.Candidate = &omniav1.CandidateOverrides{PromptPackRef: ref}
	}); err != nil {
		return false, fmt.Errorf("set the rollout candidate of AgentRuntime %s/%s: %w", a.Namespace, a.Name, err)
	}
	kubeutil.Emit(r.Recorder, a, "Rollout", []kubeutil.Event{{Type: corev1.EventTypeNormal, Reason: omniav1.EventRolloutTriggered,
		Message: fmt.Sprintf("PromptPack %s version %s is the newest on the %s channel; rolling it out", ref.Name, latest, ch)}})
	return true, nil
}

// enterPromotion records the promotion in the status, then writes the
// candidate's references into the spec. The candidate Deployment keeps
// serving until the stable one runs them. setStatus records the rollout's
// last step before it is marked promoting.
//
// The record comes first and is written at once (recordStatus): a pass
// that finds it knows the promotion is under way, and one that finds it
// at the generation it was decided on knows the spec write is still to
// be done (rollout.PromotionPending) and does it. In the other order a
// lost status write would leave a promoted spec with no promotion
// recorded, and the next pass, seeing no rollout, would remove the
// candidate before the stable Deployment ran it: an outage after
// setWeight 100.
func (r *Reconciler) enterPromotion(ctx context.Context, a *omniav1.AgentRuntime, st *omniav1.AgentRuntimeStatus, t metav1.Time, setStatus func()) (rolloutResult, error) {
	setStatus()
	msg := promotingMessage(st.Rollout)
	st.Rollout.Promoting, st.Rollout.Message = true, msg
	st.Rollout.PromotedGeneration = ptr(a.Generation)
	kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionRolloutActive, metav1.ConditionTrue, omniav1.ReasonPromoting, msg)
	if err := r.recordStatus(ctx, a, st); err != nil {
		return rolloutResult{}, err
	}
	kubeutil.Emit(r.Recorder, a, "Rollout", []kubeutil.Event{{Type: corev1.EventTypeNormal, Reason: omniav1.EventRolloutPromoting, Message: msg}})
	return r.writePromotion(ctx, a)
}

// promotingMessage is the RolloutActive message while a promotion is
// under way.
func promotingMessage(ro *omniav1.RolloutStatus) string {
	return fmt.Sprintf("promoting candidate %s to stable", ro.CandidateVersion)
}

// writePromotion writes the candidate's references into the spec; the
// write brings the agent back through its own watch.
func (r *Reconciler) writePromotion(ctx context.Context, a *omniav1.AgentRuntime) (rolloutResult, error) {
	if err := r.updateSpec(ctx, a, func(u *omniav1.AgentRuntime) {
		promoted := rollout.CandidateSpec(&u.Spec)
		u.Spec.PromptPackRef, u.Spec.Providers, u.Spec.ToolRegistryRef = promoted.PromptPackRef, promoted.Providers, promoted.ToolRegistryRef
	}); err != nil {
		return rolloutResult{}, fmt.Errorf("promote the rollout candidate of AgentRuntime %s/%s: %w", a.Namespace, a.Name, err)
	}
	return rolloutResult{Done: true, RequeueAfter: rollout.PromotionRequeue}, nil
}

// promotion waits for the stable Deployment to run the promoted spec in
// full, then removes the candidate. The wait is a poll: the Deployment's
// status changes are watched too, but a timer also covers a pass that
// finds the desired template not applied yet.
func (r *Reconciler) promotion(ctx context.Context, a *omniav1.AgentRuntime, stable *appsv1.Deployment, st *omniav1.AgentRuntimeStatus, t metav1.Time) (rolloutResult, error) {
	// Set on every pass, so a failure recorded by an earlier one clears.
	kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionRolloutActive, metav1.ConditionTrue, omniav1.ReasonPromoting, promotingMessage(st.Rollout))
	if rollout.PromotionPending(a.Generation, &a.Spec, st.Rollout) {
		// Recorded, but the spec write failed or never ran: run it now.
		return r.writePromotion(ctx, a)
	}
	live := &appsv1.Deployment{}
	found, err := r.get(ctx, a.Namespace, stable.Name, live)
	if err != nil {
		return rolloutResult{}, err
	}
	// The live Deployment must carry this pass's desired state, not only
	// be complete: right after the spec write it is complete on the old
	// template.
	desired := stable.DeepCopy()
	h, err := r.stamp(a, desired, desired.Spec)
	if err != nil {
		return rolloutResult{}, err
	}
	if !found || live.Annotations[AnnotationAppliedHash] != h || !rollout.StableComplete(live) {
		st.Rollout.Message = fmt.Sprintf("promoting candidate %s: waiting for every stable replica to run it", st.Rollout.CandidateVersion)
		return rolloutResult{RequeueAfter: rollout.PromotionRequeue}, nil
	}
	if err := r.deleteCandidate(ctx, a); err != nil {
		return rolloutResult{}, err
	}
	// A candidate set again during the promotion is a new rollout; only
	// the promoted one is cleared.
	if ro := a.Spec.Rollout; ro != nil && ro.Candidate != nil && !rollout.Active(&a.Spec) {
		if err := r.updateSpec(ctx, a, func(u *omniav1.AgentRuntime) { u.Spec.Rollout.Candidate = nil }); err != nil {
			return rolloutResult{}, fmt.Errorf("clear the promoted candidate of AgentRuntime %s/%s: %w", a.Namespace, a.Name, err)
		}
	}
	msg := fmt.Sprintf("candidate %s promoted to stable", st.Rollout.CandidateVersion)
	st.Rollout = rollout.Outcome("promoted")
	meta.RemoveStatusCondition(&st.Conditions, omniav1.ConditionTrafficRouting)
	kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionRolloutActive, metav1.ConditionFalse, omniav1.ReasonNoActiveRollout, msg)
	kubeutil.Emit(r.Recorder, a, "Rollout", []kubeutil.Event{{Type: corev1.EventTypeNormal, Reason: omniav1.EventRolloutPromoted, Message: msg}})
	return rolloutResult{}, nil
}

// rollBack abandons the candidate: it records the candidate's version so
// a version trigger does not start it again, copies the spec's references
// over the candidate's so the rollout is idle, and removes the candidate
// Deployment. The pass goes on to restore the stable replicas.
func (r *Reconciler) rollBack(ctx context.Context, a *omniav1.AgentRuntime, st *omniav1.AgentRuntimeStatus, t metav1.Time, why string) (rolloutResult, error) {
	if err := r.updateSpec(ctx, a, func(u *omniav1.AgentRuntime) {
		if v := rollout.RollbackVersion(u.Spec.Rollout.Candidate); v != "" {
			if u.Annotations == nil {
				u.Annotations = map[string]string{}
			}
			u.Annotations[omniav1.AnnotationLastRolledBackVersion] = v
		}
		rollout.Revert(&u.Spec)
	}); err != nil {
		return rolloutResult{}, fmt.Errorf("roll back the rollout candidate of AgentRuntime %s/%s: %w", a.Namespace, a.Name, err)
	}
	if err := r.deleteCandidate(ctx, a); err != nil {
		return rolloutResult{}, err
	}
	st.Rollout = rollout.Outcome(why)
	meta.RemoveStatusCondition(&st.Conditions, omniav1.ConditionTrafficRouting)
	kubeutil.SetCondition(&st.Conditions, a.Generation, t, omniav1.ConditionRolloutActive, metav1.ConditionFalse, omniav1.ReasonNoActiveRollout, why)
	kubeutil.Emit(r.Recorder, a, "Rollout", []kubeutil.Event{{Type: corev1.EventTypeWarning, Reason: omniav1.EventRolloutRolledBack, Message: why}})
	return rolloutResult{}, nil
}
