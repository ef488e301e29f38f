package activator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/agentruntime"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Kube is the Backend of a cluster. It reads through the manager's cache
// (which holds only the activator's EndpointSlices and agent pods,
// kubeutil.ApplyCacheOptions) and writes the wake annotation.
type Kube struct {
	// Client is the manager's client.
	Client client.Client
}

var _ Backend = (*Kube)(nil)

// Agent finds the AgentRuntime of Service ns/svc (the controller names
// an agent's Service after it). It is routed here when the agent
// controls the Service and the activator EndpointSlice the controller
// writes for it.
func (k *Kube) Agent(ctx context.Context, ns, svc string) (*Agent, error) {
	a := &omniav1.AgentRuntime{}
	if ok, err := kubeutil.Get(ctx, k.Client, types.NamespacedName{Namespace: ns, Name: svc}, a); err != nil || !ok {
		return nil, err
	}
	out := &Agent{Namespace: ns, Name: a.Name, NeedsWake: agentruntime.NeedsWake(a), Ports: map[int32]int32{}}
	s := &corev1.Service{}
	if ok, err := kubeutil.Get(ctx, k.Client, types.NamespacedName{Namespace: ns, Name: svc}, s); err != nil || !ok || !metav1.IsControlledBy(s, a) {
		return out, err
	}
	for _, p := range s.Spec.Ports {
		// The controller's Services target a port by number.
		if p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal > 0 {
			out.Ports[p.Port] = p.TargetPort.IntVal
		}
	}
	sl := &discoveryv1.EndpointSlice{}
	ok, err := kubeutil.Get(ctx, k.Client, types.NamespacedName{Namespace: ns, Name: agentruntime.ActivatorSliceName(a.Name)}, sl)
	if err != nil {
		return nil, err
	}
	out.Routed = ok && metav1.IsControlledBy(sl, a) && len(s.Spec.Selector) == 0
	return out, nil
}

// Wake sets the wake annotation with a merge patch: nothing else of the
// agent is sent, so it cannot undo another writer's change.
func (k *Kube) Wake(ctx context.Context, ns, name string, at time.Time) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		omniav1.AnnotationWakeRequestedAt: at.UTC().Format(time.RFC3339)}}})
	if err != nil {
		return err
	}
	a := &omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("set %s on AgentRuntime %s/%s: %w", omniav1.AnnotationWakeRequestedAt, ns, name, err)
	}
	return nil
}

// ReadyPod returns the IP of a Ready, not terminating pod of the agent,
// found by the agent's labels in its namespace.
func (k *Kube) ReadyPod(ctx context.Context, ns, name string) (string, error) {
	sel := agentruntime.SelectorLabels(name)
	delete(sel, omniav1.LabelTrack) // a candidate's pods serve the Service too
	var pods corev1.PodList
	if err := k.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(sel)); err != nil {
		return "", fmt.Errorf("list pods of AgentRuntime %s/%s: %w", ns, name, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && podReady(p) {
			return p.Status.PodIP, nil
		}
	}
	return "", nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
