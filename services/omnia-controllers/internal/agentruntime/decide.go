package agentruntime

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// decide plans one pass over an agent: it resolves the inputs and, once
// all are usable, plans the writes of the Deployment, Service and HPA,
// the rollout, the OIDC key mirror and the idle deadline (with the
// Service's route to the activator, activator.go), and the status
// that records them. It is pure: what it cannot read from the snapshot it
// asks (plan.ask) or assumes (a write's success, until its outcome is in
// the snapshot). Success is requeued only for the timers of
// docs/omnia-controllers.md: rollout steps and analysis, the OIDC key
// refresh and the idle deadline.
func decide(s snapshot) plan {
	d := newDecider(&s)
	d.pass()
	return d.p
}

func (d *decider) pass() {
	in, st := d.s.in, d.st
	// The facades' reports are folded on every path that writes status,
	// before the idle rules read the sum.
	d.sessionReports()
	// Judged from the spec alone, on every path: it never blocks the agent.
	d.unsupported()
	res := Resolve(in, &st.Conditions, d.t)
	for _, e := range res.Events {
		d.warn("Resolve", e.Reason, e.Message)
	}
	if !res.Usable {
		// Build nothing from a half-resolved spec; an existing Deployment
		// keeps serving what it was built from.
		st.Phase = res.Phase
		d.set(omniav1.ConditionReady, metav1.ConditionFalse, omniav1.ReasonRuntimeNotReady, "waiting for the agent's inputs")
		d.end(st, 0, nil, res.Retry)
		return
	}

	image, err := RuntimeImage(in.Agent, d.s.cfg)
	if err != nil {
		d.imageUnavailable("runtime", err)
		return
	}
	if _, err := FacadeImage(in.Agent, d.s.cfg); err != nil {
		d.imageUnavailable("facade", err)
		return
	}
	d.set(omniav1.ConditionFrameworkReady, metav1.ConditionTrue, omniav1.ReasonFrameworkImageResolved, image)

	// The idle deadline may delete the agent or hold it at zero replicas.
	idle := d.idleDeadline()
	if idle.Deleted {
		return
	}
	want, err := BuildDeployment(in, res, d.s.cfg, image)
	if err != nil {
		// A spec problem (the agent's volumes): the same spec fails the
		// same way, so wait for an edit; a Deployment already running keeps
		// what it was built from.
		d.set(omniav1.ConditionDeploymentReady, metav1.ConditionFalse, omniav1.ReasonVolumesInvalid, err.Error())
		st.Phase = omniav1.AgentRuntimePhaseFailed
		d.set(omniav1.ConditionReady, metav1.ConditionFalse, omniav1.ReasonRuntimeNotReady, "the Deployment cannot be built: "+err.Error())
		d.end(st, 0, nil, nil)
		return
	}
	if idle.ScaleToZero {
		want.Spec.Replicas = ptr(int32(0))
	}
	// The rollout engine runs the candidate Deployment and may change the
	// stable one's replicas (replica-weighted traffic) or end the pass
	// after a spec write of its own (a version trigger, a promotion). It
	// works on a copy: when it fails, the stable Deployment is applied all
	// the same, at the count the spec gives it (the candidate may not be
	// serving), and the failure is recorded in RolloutActive and returned
	// after the status write.
	//
	// Not when the failure is one a retry may not meet (a conflict after a
	// read that lagged the last write, an outage): the candidate serves
	// its share as before, and restoring the stable count would start pods
	// of the old version, which the retry removes again. The pass ends
	// there and controller-runtime retries it with backoff.
	split := want.DeepCopy()
	ro, roErr := d.rollout(res, image, split)
	if d.asked() {
		return
	}
	if transientAPIError(roErr) {
		d.end(nil, 0, roErr, nil)
		return
	}
	if roErr != nil {
		d.rolloutFailed(roErr)
	} else {
		want = split
		if ro.Done {
			d.end(st, ro.RequeueAfter, nil, nil)
			return
		}
	}

	// The tools file and the facade's access go first: the pods of a new
	// template mount the one and run as the other.
	err = d.toolsConfigMap(res.Tools)
	if err == nil {
		err = d.facadeAccess()
	}
	var dep *appsv1.Deployment
	if err == nil {
		dep, err = d.deployment(want, d.s.live.stable, autoscalerFloor(in))
	}
	if err == nil {
		err = d.disruptionBudget()
	}
	if d.failedApply(err, roErr, omniav1.ConditionDeploymentReady, omniav1.ReasonDeploymentFailed) {
		return
	}
	d.set(omniav1.ConditionDeploymentReady, metav1.ConditionTrue, omniav1.ReasonDeploymentCreated, "Deployment "+dep.Name)
	svc := BuildService(in.Agent)
	ready := dep.Status.ReadyReplicas
	if c := d.s.live.candidate.obj; c != nil {
		// The Service fronts the candidate's pods too.
		ready += c.Status.ReadyReplicas
	}
	svcMsg, err := d.routeService(svc, routeToActivator(d.s.cfg, idle.ScaleToZero, d.routed(), ready))
	if d.asked() {
		return
	}
	if d.failedApply(err, roErr, omniav1.ConditionServiceReady, omniav1.ReasonServiceFailed) {
		return
	}
	d.set(omniav1.ConditionServiceReady, metav1.ConditionTrue, omniav1.ReasonServiceCreated, svcMsg)
	st.ServiceEndpoint = fmt.Sprintf("%s.%s.svc.cluster.local:%d", in.Agent.Name, in.Agent.Namespace, primaryPort(in.Agent))
	// An HPA failure is in AutoscalingReady; the pass goes on so the
	// status that shows it is written.
	asAfter, hpaErr := d.autoscaling()

	jwksAfter, jwksErr := d.mirrorJWKS()
	if d.asked() {
		return
	}

	st.ActiveVersion = ptr(res.Pack.Spec.Version)
	desired := int32(0)
	if dep.Spec.Replicas != nil {
		desired = *dep.Spec.Replicas
	}
	st.Replicas = &omniav1.ReplicaStatus{Desired: desired, Ready: dep.Status.ReadyReplicas, Available: dep.Status.AvailableReplicas}
	if dep.Status.ReadyReplicas > 0 {
		st.Phase = omniav1.AgentRuntimePhaseRunning
		d.set(omniav1.ConditionReady, metav1.ConditionTrue, omniav1.ReasonRuntimeReady,
			fmt.Sprintf("%d of %d replica(s) ready", dep.Status.ReadyReplicas, desired))
	} else {
		st.Phase = omniav1.AgentRuntimePhasePending
		d.set(omniav1.ConditionReady, metav1.ConditionFalse, omniav1.ReasonRuntimeNotReady, "no replica is ready yet")
	}
	if idle.ScaleToZero {
		holdAtZero(in.Agent, st, d.t)
	}
	// Failures that did not stop the pass: the rollout engine's, the
	// HPA's, a transient one of the key mirror, and a missing candidate
	// input (the stable side is applied above). Each is in a condition;
	// the status is written, then controller-runtime retries with backoff.
	if err := errors.Join(roErr, hpaErr, jwksErr, ro.Retry); err != nil {
		d.end(st, 0, err, nil)
		return
	}
	// Timers only for what no watch event reports: rollout steps and
	// analysis, the OIDC key refresh, the idle deadline, the recheck for
	// KEDA's CRD.
	d.end(st, soonest(idle.RequeueAfter, ro.RequeueAfter, jwksAfter, asAfter), nil, nil)
}

// imageUnavailable ends a pass that has no image to build the agent's
// what ("runtime", "facade") from, err saying why: a spec or operator
// configuration problem, which a retry would read the same and fail on
// the same, so the agent waits in Pending for an edit.
func (d *decider) imageUnavailable(what string, err error) {
	msg := err.Error()
	if d.set(omniav1.ConditionFrameworkReady, metav1.ConditionFalse, omniav1.ReasonFrameworkImageUnavailable, msg) {
		d.warn("Resolve", omniav1.EventFrameworkImageUnavailable, msg)
	}
	d.st.Phase = omniav1.AgentRuntimePhasePending
	d.set(omniav1.ConditionReady, metav1.ConditionFalse, omniav1.ReasonRuntimeNotReady, "no "+what+" image")
	d.end(d.st, 0, nil, nil)
}

// failedApply ends the pass when err, from applying what condition typ
// reports on, is not nil, and says whether it did. A transient API error
// is not a problem with the spec: the phase stands and controller-runtime
// retries with backoff (the status is written only to record roErr, a
// rollout failure of the same pass). Any other error sets typ False with
// reason and the phase Failed.
func (d *decider) failedApply(err, roErr error, typ, reason string) bool {
	switch {
	case err == nil:
		return false
	case transientAPIError(err) && roErr == nil:
		d.end(nil, 0, err, nil)
	case transientAPIError(err):
		d.end(d.st, 0, errors.Join(roErr, err), nil)
	default:
		d.set(typ, metav1.ConditionFalse, reason, err.Error())
		d.st.Phase = omniav1.AgentRuntimePhaseFailed
		d.end(d.st, 0, errors.Join(roErr, err), nil)
	}
	return true
}
