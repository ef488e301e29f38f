// Package runpolicy builds the NetworkPolicies the agent-controller keeps
// in each namespace that has runs, before their Jobs (docs/security.md,
// "NetworkPolicies"): one selects every run pod of the namespace and
// admits nothing on ingress, since a Job run serves nothing; one selects
// the realtime run pods and admits realtime-gateway's pods to their
// session port. Policies add up, so a realtime run's pod admits exactly
// the gateway whichever of the two exist. Egress is not restricted: runs
// call their vendor, their sinks and NATS. Two policies per namespace,
// not one per run: a run costs the API server no write for it, and the
// network plugin holds two policies per namespace, not thousands.
package runpolicy

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
)

// Names of the namespace's run policies: the name is the controller's,
// so a policy found under it is set back to the controller's spec.
const (
	// RunsName isolates every run pod of the namespace.
	RunsName = "agentplane-runs"
	// RealtimeRunsName admits the gateway to the realtime run pods.
	RealtimeRunsName = "agentplane-realtime-runs"
)

// ManagedByLabel and ManagedBy label the run policies, as the Kubernetes
// recommended labels say who manages an object.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "agent-controller"
)

// DefaultGatewayPodLabels is what --gateway-pod-labels is by default: the
// label the realtime-gateway chart gives its pods.
const DefaultGatewayPodLabels = "app.kubernetes.io/name=realtime-gateway"

// Config says where realtime-gateway's pods are, the only peers a realtime
// run's session port admits.
type Config struct {
	// GatewayNamespace is realtime-gateway's namespace.
	GatewayNamespace string
	// GatewayPodLabels select realtime-gateway's pods in it; never empty,
	// which would admit every pod of that namespace.
	GatewayPodLabels map[string]string
}

// ParsePodLabels reads --gateway-pod-labels: comma-separated key=value
// pairs, at least one, each a valid label (ConvertSelectorToLabelsMap
// checks keys and values).
func ParsePodLabels(s string) (map[string]string, error) {
	m, err := labels.ConvertSelectorToLabelsMap(s)
	if err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("no label given: an empty selector would admit every pod of the gateway's namespace")
	}
	return m, nil
}

// IsRealtime reports whether job runs a realtime session: its pod carries
// the execution label jobbuild gives realtime pods.
func IsRealtime(job *batchv1.Job) bool {
	return job != nil && job.Spec.Template.Labels[agentsv1alpha1.LabelExecution] == string(agentsv1alpha1.ExecutionRealtime)
}

// For returns the policy of the namespace that guards the pod of job:
// for a realtime run, RealtimeRunsName, selecting the realtime run pods
// by the labels jobbuild gives them and admitting TCP realtime.Port from
// the gateway's pods in the gateway's namespace only (both selectors in
// one peer, so both must match); for any other run, RunsName, selecting
// every run pod and admitting nothing. A run Job's template cannot steer
// either: jobbuild sets these labels over the Station's.
func For(namespace string, job *batchv1.Job, cfg Config) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name: RunsName, Namespace: namespace,
			Labels: map[string]string{ManagedByLabel: ManagedBy},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{agentsv1alpha1.LabelComponent: agentsv1alpha1.ComponentJob}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if !IsRealtime(job) {
		return np
	}
	np.Name = RealtimeRunsName
	np.Spec.PodSelector.MatchLabels[agentsv1alpha1.LabelExecution] = string(agentsv1alpha1.ExecutionRealtime)
	gateway := make(map[string]string, len(cfg.GatewayPodLabels))
	for k, v := range cfg.GatewayPodLabels {
		gateway[k] = v
	}
	np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(realtime.Port))}},
		From: []networkingv1.NetworkPolicyPeer{{
			// The API server labels every Namespace with its name
			// (corev1.LabelMetadataName), the one way a peer can name one.
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: cfg.GatewayNamespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: gateway},
		}},
	}}
	return np
}
