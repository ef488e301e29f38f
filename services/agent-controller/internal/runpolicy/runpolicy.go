// Package runpolicy builds the NetworkPolicy the agent-controller creates
// for each run before its Job (docs/security.md, "NetworkPolicies"): it
// selects the run's pod and admits, on ingress, only realtime-gateway's
// pods to a realtime run's session port, and nothing at all to a Job run,
// which serves nothing. Egress is not restricted: runs call their vendor,
// their sinks and NATS.
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
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// NamePrefix begins the name of a run's NetworkPolicy; see Name.
const NamePrefix = "agentplane-run-"

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

// Name names the NetworkPolicy of the run whose Agent has uid: the uid
// rather than the Agent's name, as for the run's Secrets, so a recreated
// same-named Agent never meets its predecessor's policy by name.
func Name(uid string) string { return NamePrefix + uid }

// IsRealtime reports whether job runs a realtime session: its pod carries
// the execution label jobbuild gives realtime pods.
func IsRealtime(job *batchv1.Job) bool {
	return job != nil && job.Spec.Template.Labels[agentsv1alpha1.LabelExecution] == string(agentsv1alpha1.ExecutionRealtime)
}

// For returns the NetworkPolicy of a's run, whose Job is job: in the
// Agent's namespace, controlled by the Agent so it goes with it, selecting
// the run's pod by the labels jobbuild gives it (component job and the
// Agent's bounded name). For a realtime run it admits TCP realtime.Port
// from the gateway's pods in the gateway's namespace only (both selectors
// in one peer, so both must match); for any other run it admits nothing.
func For(a *agentsv1alpha1.Agent, job *batchv1.Job, cfg Config) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name: Name(string(a.UID)), Namespace: a.Namespace,
			Labels: map[string]string{agentsv1alpha1.LabelAgent: jobbuild.SafeName(a.Name)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: agentsv1alpha1.GroupVersion.String(), Kind: "Agent", Name: a.Name, UID: a.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
				agentsv1alpha1.LabelComponent: agentsv1alpha1.ComponentJob,
				agentsv1alpha1.LabelAgent:     jobbuild.SafeName(a.Name),
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if !IsRealtime(job) {
		return np
	}
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
