package agentruntime

import (
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BuildPDB returns the agent's PodDisruptionBudget, or nil when the agent
// runs a single replica (a budget there could only block a node drain).
// It allows one pod at a time to be evicted (maxUnavailable 1) rather than
// keeping replicas-1 available: the same budget then holds whatever
// count an autoscaler picks, and each evicted pod drains its sessions
// (pod.go). Its selector has no track, so it covers a rollout's candidate
// pods too, as the Service does
// (https://kubernetes.io/docs/tasks/run-application/configure-pdb/).
func BuildPDB(in Inputs) *policyv1.PodDisruptionBudget {
	if !multiReplica(in) {
		return nil
	}
	a := in.Agent
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: a.Namespace, Labels: objectLabels(a.Name)},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: objectLabels(a.Name)},
		},
	}
}

// multiReplica reports whether the agent may run more than one replica:
// spec.runtime.replicas > 1, or an autoscaler whose maximum is above one.
func multiReplica(in Inputs) bool {
	if autoscaled(in) {
		as := EffectiveAutoscaling(in)
		return as.MaxReplicas == nil || *as.MaxReplicas > 1
	}
	r := desiredReplicas(in)
	return r != nil && *r > 1
}

// disruptionBudget plans the write of the PodDisruptionBudget when the
// agent runs more than one replica, and its delete when it no longer does.
func (d *decider) disruptionBudget() error {
	want := BuildPDB(d.s.in)
	live := d.s.live.pdb
	if live.err != nil {
		return live.err
	}
	if want == nil {
		if live.obj != nil && d.controls(live.obj) {
			if o := d.do(write{op: opDelete, obj: live.obj.DeepCopy()}); client.IgnoreNotFound(o.err) != nil {
				return fmt.Errorf("delete PodDisruptionBudget %s/%s: %w", live.obj.Namespace, live.obj.Name, o.err)
			}
		}
		return nil
	}
	drifted := live.obj != nil && (!equality.Semantic.DeepEqual(live.obj.Spec.MaxUnavailable, want.Spec.MaxUnavailable) ||
		live.obj.Spec.MinAvailable != nil || !equality.Semantic.DeepEqual(live.obj.Spec.Selector, want.Spec.Selector))
	return d.keepOwned(want, want.Spec, liveOf(live), drifted, func(upd client.Object) {
		upd.(*policyv1.PodDisruptionBudget).Spec = want.Spec
	})
}
