package agentruntime

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/promptpack"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/rollout"
)

// This file plans the rollout's spec writes: a version trigger starting a
// rollout, a promotion making the candidate the spec, and a rollback
// making the candidate the spec's again.

// versionTrigger sets a candidate when spec.rollout.trigger sees a newer
// version on its channel. It reports whether it wrote the spec; the write
// brings the agent back through its own watch.
func (d *decider) versionTrigger() (bool, error) {
	ro := d.a.Spec.Rollout
	if ro == nil || ro.Trigger == nil {
		return false, nil
	}
	ch := ro.Trigger.PromptPackChannel
	latest := ""
	if p := promptpack.ChannelMax(d.s.in.Packs, ch); p != nil {
		latest = p.Spec.Version
	}
	ref := rollout.Trigger(d.a, latest)
	if ref == nil {
		return false, nil
	}
	if err := d.updateAgent("set the rollout candidate", func(u *omniav1.AgentRuntime) {
		u.Spec.Rollout.Candidate = &omniav1.CandidateOverrides{PromptPackRef: ref}
	}); err != nil {
		return false, err
	}
	d.emit("Rollout", corev1.EventTypeNormal, omniav1.EventRolloutTriggered,
		fmt.Sprintf("PromptPack %s version %s is the newest on the %s channel; rolling it out", ref.Name, latest, ch))
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
func (d *decider) enterPromotion(setStatus func()) (rolloutResult, error) {
	st := d.st
	setStatus()
	msg := promotingMessage(st.Rollout)
	st.Rollout.Promoting, st.Rollout.Message = true, msg
	st.Rollout.PromotedGeneration = ptr(d.s.in.Agent.Generation)
	d.set(omniav1.ConditionRolloutActive, metav1.ConditionTrue, omniav1.ReasonPromoting, msg)
	if err := d.recordStatus(); err != nil {
		return rolloutResult{}, err
	}
	d.emit("Rollout", corev1.EventTypeNormal, omniav1.EventRolloutPromoting, msg)
	return d.writePromotion()
}

// promotingMessage is the RolloutActive message while a promotion is
// under way.
func promotingMessage(ro *omniav1.RolloutStatus) string {
	return fmt.Sprintf("promoting candidate %s to stable", ro.CandidateVersion)
}

// writePromotion writes the candidate's references into the spec; the
// write brings the agent back through its own watch.
func (d *decider) writePromotion() (rolloutResult, error) {
	if err := d.updateAgent("promote the rollout candidate", func(u *omniav1.AgentRuntime) {
		promoted := rollout.CandidateSpec(&u.Spec)
		u.Spec.PromptPackRef, u.Spec.Providers, u.Spec.ToolRegistryRef = promoted.PromptPackRef, promoted.Providers, promoted.ToolRegistryRef
	}); err != nil {
		return rolloutResult{}, err
	}
	return rolloutResult{Done: true, RequeueAfter: rollout.PromotionRequeue}, nil
}

// promotion waits for the stable Deployment to run the promoted spec in
// full, then removes the candidate. The wait is a poll: the Deployment's
// status changes are watched too, but a timer also covers a pass that
// finds the desired template not applied yet.
func (d *decider) promotion(stable *appsv1.Deployment) (rolloutResult, error) {
	st := d.st
	// Set on every pass, so a failure recorded by an earlier one clears.
	d.set(omniav1.ConditionRolloutActive, metav1.ConditionTrue, omniav1.ReasonPromoting, promotingMessage(st.Rollout))
	if rollout.PromotionPending(d.a.Generation, &d.a.Spec, st.Rollout) {
		// Recorded, but the spec write failed or never ran: run it now.
		return d.writePromotion()
	}
	live := d.s.live.stable
	if live.err != nil {
		return rolloutResult{}, live.err
	}
	// The live Deployment must carry this pass's desired state, not only
	// be complete: right after the spec write it is complete on the old
	// template.
	h := d.own(stable.DeepCopy(), stable.Spec)
	if live.obj == nil || live.obj.Annotations[AnnotationAppliedHash] != h || !rollout.StableComplete(live.obj) {
		st.Rollout.Message = fmt.Sprintf("promoting candidate %s: waiting for every stable replica to run it", st.Rollout.CandidateVersion)
		return rolloutResult{RequeueAfter: rollout.PromotionRequeue}, nil
	}
	if err := d.deleteCandidate(); err != nil {
		return rolloutResult{}, err
	}
	// A candidate set again during the promotion is a new rollout; only
	// the promoted one is cleared.
	if ro := d.a.Spec.Rollout; ro != nil && ro.Candidate != nil && !rollout.Active(&d.a.Spec) {
		if err := d.updateAgent("clear the promoted candidate", func(u *omniav1.AgentRuntime) { u.Spec.Rollout.Candidate = nil }); err != nil {
			return rolloutResult{}, err
		}
	}
	msg := fmt.Sprintf("candidate %s promoted to stable", st.Rollout.CandidateVersion)
	st.Rollout = rollout.Outcome("promoted")
	meta.RemoveStatusCondition(&st.Conditions, omniav1.ConditionTrafficRouting)
	d.set(omniav1.ConditionRolloutActive, metav1.ConditionFalse, omniav1.ReasonNoActiveRollout, msg)
	d.emit("Rollout", corev1.EventTypeNormal, omniav1.EventRolloutPromoted, msg)
	return rolloutResult{}, nil
}

// rollBack abandons the candidate: it records the candidate's version so
// a version trigger does not start it again, copies the spec's references
// over the candidate's so the rollout is idle, and removes the candidate
// Deployment. The pass goes on to restore the stable replicas.
func (d *decider) rollBack(why string) (rolloutResult, error) {
	if err := d.updateAgent("roll back the rollout candidate", func(u *omniav1.AgentRuntime) {
		if v := rollout.RollbackVersion(u.Spec.Rollout.Candidate); v != "" {
			if u.Annotations == nil {
				u.Annotations = map[string]string{}
			}
			u.Annotations[omniav1.AnnotationLastRolledBackVersion] = v
		}
		rollout.Revert(&u.Spec)
	}); err != nil {
		return rolloutResult{}, err
	}
	// The reverted spec ends the rollout, whatever follows in this pass.
	d.p.rolledBack = true
	if err := d.deleteCandidate(); err != nil {
		return rolloutResult{}, err
	}
	st := d.st
	st.Rollout = rollout.Outcome(why)
	meta.RemoveStatusCondition(&st.Conditions, omniav1.ConditionTrafficRouting)
	d.set(omniav1.ConditionRolloutActive, metav1.ConditionFalse, omniav1.ReasonNoActiveRollout, why)
	d.warn("Rollout", omniav1.EventRolloutRolledBack, why)
	return rolloutResult{}, nil
}
