package agentruntime

import (
	"encoding/json"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// The applied-hash annotation says whether the desired state changed since
// the last write; it cannot say whether someone changed the live object
// since (kubectl edit, scale, a stray apply), because such an edit leaves
// the annotation as it was. The functions below compare the fields the
// controller owns with the live object, so an edit is repaired on the
// next pass. The live object carries the API server's defaults and other
// actors' additions, so the comparison asks only whether live still
// carries every field the desired state sets (covers), never for
// equality.

// deploymentDrifted reports whether the live Deployment no longer carries
// what the controller owns of want: its labels, its pod template and,
// when replicas is not nil, that replica count (replicasToWrite).
func deploymentDrifted(want, live *appsv1.Deployment, replicas *int32) bool {
	if replicas != nil && (live.Spec.Replicas == nil || *live.Spec.Replicas != *replicas) {
		return true
	}
	return !labelsCovered(want.Labels, live.Labels) || !covers(want.Spec.Template, live.Spec.Template)
}

// serviceDrifted reports whether the live Service no longer carries what
// the controller owns of want: its labels, type and ports, and exactly
// its selector (an added selector key would change which pods it fronts).
func serviceDrifted(want, live *corev1.Service) bool {
	return !labelsCovered(want.Labels, live.Labels) || live.Spec.Type != want.Spec.Type ||
		!maps.Equal(live.Spec.Selector, want.Spec.Selector) || !covers(want.Spec.Ports, live.Spec.Ports)
}

// hpaDrifted reports whether the live HorizontalPodAutoscaler no longer
// carries what the controller owns of want: its labels and its spec.
func hpaDrifted(want, live *autoscalingv2.HorizontalPodAutoscaler) bool {
	return !labelsCovered(want.Labels, live.Labels) || !covers(want.Spec, live.Spec)
}

func labelsCovered(want, live map[string]string) bool {
	for k, v := range want {
		if got, ok := live[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// covers reports whether live carries every field set in want, comparing
// their JSON forms: a field want leaves out (empty, nil, omitted) is not
// compared, so defaults the API server fills in are no drift; an object
// of live may hold more keys (defaults, annotations another actor adds,
// such as kubectl rollout restart's); a list must hold exactly want's
// items, in order, so an added or removed container, variable or volume
// is drift.
func covers(want, live any) bool {
	w, err := jsonTree(want)
	if err != nil {
		return false
	}
	l, err := jsonTree(live)
	if err != nil {
		return false
	}
	return coversTree(w, l)
}

func jsonTree(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}

func coversTree(want, live any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			if !coversTree(wv, l[k]) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(w) {
			return false
		}
		for i := range w {
			if !coversTree(w[i], l[i]) {
				return false
			}
		}
		return true
	}
	return want == live
}

// replicasToWrite is the replica count an apply writes to the live
// Deployment: the desired count when the controller owns it. Under an
// autoscaler (desired nil) the autoscaler's count stands, except that a
// Deployment found at zero replicas is raised to floor (autoscalerFloor):
// only the idle deadline puts an HPA-scaled agent at zero, and an HPA
// never scales a target up from zero, so without this a woken agent would
// stay at zero for good. A floor of 0 is KEDA's minReplicaCount 0: KEDA
// scales the Deployment to zero and back itself, so zero stands.
func replicasToWrite(desired, live *int32, floor int32) *int32 {
	switch {
	case desired != nil:
		return desired
	case live != nil && *live == 0 && floor > 0:
		return ptr(floor)
	}
	return nil
}

// autoscalerFloor is the count an autoscaled agent restarts from: its
// HPA's minReplicas or its ScaledObject's minReplicaCount (which may be
// 0), 1 with neither.
func autoscalerFloor(in Inputs) int32 {
	if h := BuildHPA(in); h != nil && h.Spec.MinReplicas != nil {
		return *h.Spec.MinReplicas
	}
	if kedaWanted(in) {
		if as := EffectiveAutoscaling(in); as.MinReplicas != nil {
			return *as.MinReplicas
		}
	}
	return 1
}
