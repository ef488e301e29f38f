package agentruntime

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// This file plans the writes of the objects the agent owns: the
// Deployments, the Service and the HPA (the KEDA ScaledObject: keda.go). An object of the agent's name
// that the agent does not control is refused, never taken over.

// deployment plans the create of a Deployment or, when the desired
// state's hash differs from the one last applied or the live object
// drifted from it (deploymentDrifted: an edit by someone else), the
// replacement of the fields the controller owns. An unchanged desired
// state on an unedited Deployment is not written at all, so the pod
// template (and its hash) is touched only when an input changed. floor is
// the count an autoscaled Deployment found at zero is raised to
// (replicasToWrite). It returns the Deployment as the write leaves it.
func (d *decider) deployment(want *appsv1.Deployment, live found[*appsv1.Deployment], floor int32) (*appsv1.Deployment, error) {
	h := d.own(want, want.Spec)
	if live.err != nil {
		return nil, live.err
	}
	if live.obj == nil {
		o := d.do(write{op: opCreate, obj: want})
		if o.err != nil {
			return nil, fmt.Errorf("create Deployment %s/%s: %w", want.Namespace, want.Name, o.err)
		}
		return o.obj.(*appsv1.Deployment), nil
	}
	if !d.controls(live.obj) {
		return nil, notOwned(live.obj)
	}
	replicas := replicasToWrite(want.Spec.Replicas, live.obj.Spec.Replicas, floor)
	if live.obj.Annotations[AnnotationAppliedHash] == h && !deploymentDrifted(want, live.obj, replicas) {
		return live.obj, nil
	}
	upd := live.obj.DeepCopy()
	upd.Labels = mergeMap(upd.Labels, want.Labels)
	upd.Annotations = mergeMap(upd.Annotations, want.Annotations)
	upd.OwnerReferences = want.OwnerReferences
	upd.Spec.Template = want.Spec.Template
	if replicas != nil {
		upd.Spec.Replicas = replicas // otherwise the autoscaler's count stands
	}
	o := d.do(write{op: opUpdate, obj: upd})
	if o.err != nil {
		return nil, fmt.Errorf("update Deployment %s/%s: %w", upd.Namespace, upd.Name, o.err)
	}
	return o.obj.(*appsv1.Deployment), nil
}

// service plans the write of the Service as deployment does the
// Deployment's.
func (d *decider) service(want *corev1.Service) error {
	h := d.own(want, want.Spec)
	live := d.s.live.service
	switch {
	case live.err != nil:
		return live.err
	case live.obj == nil:
		if o := d.do(write{op: opCreate, obj: want}); o.err != nil {
			return fmt.Errorf("create Service %s/%s: %w", want.Namespace, want.Name, o.err)
		}
		return nil
	case !d.controls(live.obj):
		return notOwned(live.obj)
	case live.obj.Annotations[AnnotationAppliedHash] == h && !serviceDrifted(want, live.obj):
		return nil
	}
	upd := live.obj.DeepCopy()
	upd.Labels = mergeMap(upd.Labels, want.Labels)
	upd.Annotations = mergeMap(upd.Annotations, want.Annotations)
	upd.OwnerReferences = want.OwnerReferences
	upd.Spec.Ports, upd.Spec.Selector, upd.Spec.Type = want.Spec.Ports, want.Spec.Selector, want.Spec.Type
	if o := d.do(write{op: opUpdate, obj: upd}); o.err != nil {
		return fmt.Errorf("update Service %s/%s: %w", upd.Namespace, upd.Name, o.err)
	}
	return nil
}

// autoscaling plans the write or removal of the HPA or KEDA ScaledObject
// of the agent's effective policy (its own, else its Workspace service
// group's) and sets AutoscalingReady. A failure is recorded in that
// condition and returned, for the status to be written and the pass
// retried with backoff. The duration is the pass's timer (keda.go).
func (d *decider) autoscaling() (time.Duration, error) {
	in := d.s.in
	a := in.Agent
	set := func(status metav1.ConditionStatus, reason, msg string) {
		d.set(omniav1.ConditionAutoscalingReady, status, reason, msg)
	}
	fail := func(err error) (time.Duration, error) {
		set(metav1.ConditionFalse, omniav1.ReasonAutoscalingError, err.Error())
		return 0, err
	}
	if !kedaWanted(in) {
		if err := d.dropScaledObject(); err != nil {
			return fail(err)
		}
	}
	want := BuildHPA(in)
	live := d.s.live.hpa
	if live.err != nil {
		return 0, live.err
	}
	if want == nil {
		if live.obj != nil && d.controls(live.obj) {
			if o := d.do(write{op: opDelete, obj: live.obj.DeepCopy()}); client.IgnoreNotFound(o.err) != nil {
				return fail(fmt.Errorf("delete HorizontalPodAutoscaler %s/%s: %w", a.Namespace, a.Name, o.err))
			}
		}
		if kedaWanted(in) {
			return d.scaledObject()
		}
		meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionAutoscalingReady)
		return 0, nil
	}
	h := d.own(want, want.Spec)
	var err error
	switch {
	case live.obj == nil:
		err = d.do(write{op: opCreate, obj: want}).err
	case !d.controls(live.obj):
		err := notOwned(live.obj)
		set(metav1.ConditionFalse, omniav1.ReasonAutoscalerNotOwned, err.Error())
		return 0, err
	case live.obj.Annotations[AnnotationAppliedHash] != h || hpaDrifted(want, live.obj):
		upd := live.obj.DeepCopy()
		upd.Labels = mergeMap(upd.Labels, want.Labels)
		upd.Annotations = mergeMap(upd.Annotations, want.Annotations)
		upd.OwnerReferences = want.OwnerReferences
		upd.Spec = want.Spec
		err = d.do(write{op: opUpdate, obj: upd}).err
	}
	if err != nil {
		return fail(fmt.Errorf("write HorizontalPodAutoscaler %s/%s: %w", a.Namespace, a.Name, err))
	}
	set(metav1.ConditionTrue, omniav1.ReasonScaling, fmt.Sprintf("HorizontalPodAutoscaler %s scales %d to %d replicas", a.Name, *want.Spec.MinReplicas, want.Spec.MaxReplicas))
	return 0, nil
}

// notOwned refuses to take over an object of the same name that someone
// else created: overwriting it could break whatever owns it.
func notOwned(obj client.Object) error {
	return fmt.Errorf("%T %s/%s exists and is not controlled by this AgentRuntime", obj, obj.GetNamespace(), obj.GetName())
}

func mergeMap(dst, src map[string]string) map[string]string {
	if dst == nil {
		dst = map[string]string{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}
