package agentruntime

import (
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// NamespaceWorkspace picks the Workspace that owns a namespace among those
// naming it in spec.namespace.name. Usually there is one. A Workspace its
// controller refused (the namespace belongs to another) never applies; of
// the rest, the one that holds the namespace (NamespaceReady True) wins,
// then the oldest, then the first by name, so the pick is stable across
// reconciles. nil when no Workspace applies.
func NamespaceWorkspace(wss []omniav1.Workspace) *omniav1.Workspace {
	var cands []*omniav1.Workspace
	for i := range wss {
		w := &wss[i]
		c := meta.FindStatusCondition(w.Status.Conditions, omniav1.ConditionNamespaceReady)
		if w.DeletionTimestamp != nil || c != nil && c.Status == metav1.ConditionFalse && c.Reason == omniav1.ReasonNamespaceClaimed {
			continue
		}
		cands = append(cands, w)
	}
	if len(cands) == 0 {
		return nil
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		ra := meta.IsStatusConditionTrue(a.Status.Conditions, omniav1.ConditionNamespaceReady)
		rb := meta.IsStatusConditionTrue(b.Status.Conditions, omniav1.ConditionNamespaceReady)
		if ra != rb {
			return ra
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return cands[0]
}

// serviceGroup is the agent's service group name: spec.serviceGroup, else
// "default".
func serviceGroup(a *omniav1.AgentRuntime) string {
	if a.Spec.ServiceGroup != "" {
		return a.Spec.ServiceGroup
	}
	return omniav1.DefaultServiceGroup
}

// EffectiveAutoscaling is the autoscaling policy an agent runs with: its
// own spec.runtime.autoscaling when set, as a whole (no field of the
// Workspace's fills a gap in it); else the autoscaling of its service
// group in the namespace's Workspace; else none.
func EffectiveAutoscaling(in Inputs) *omniav1.AutoscalingConfig {
	a := in.Agent
	if rt := a.Spec.Runtime; rt != nil && rt.Autoscaling != nil {
		return rt.Autoscaling
	}
	if in.Workspace == nil {
		return nil
	}
	if g := in.Workspace.Spec.ServiceGroup(serviceGroup(a)); g != nil {
		return g.Autoscaling
	}
	return nil
}

// workspaceRuntime is the Workspace's pod defaults, nil when none apply.
func workspaceRuntime(in Inputs) *omniav1.WorkspaceRuntime {
	if in.Workspace == nil {
		return nil
	}
	return in.Workspace.Spec.Runtime
}
