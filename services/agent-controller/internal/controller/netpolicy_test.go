package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
	"github.com/agentplane/agentplane/services/agent-controller/internal/runpolicy"
)

// testGateway is where the tests' controllers say realtime-gateway runs.
var testGateway = runpolicy.Config{GatewayNamespace: "agentplane-system", GatewayPodLabels: map[string]string{"app.kubernetes.io/name": "realtime-gateway"}}

// startWithRunPolicy runs a controller for ns that accepts realtime runs
// (their shared key in ns) and gives every run its NetworkPolicy.
func startWithRunPolicy(t *testing.T, ns string) {
	t.Helper()
	if err := env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: realtime.KeySecretName, Namespace: ns},
		Data: map[string][]byte{realtime.KeySecretKey: []byte(strings.Repeat("k", 32))}}); err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	gw := testGateway
	ctl := New(c, env.Kube, metrics.New(), Options{Namespace: ns, PollInterval: 2 * time.Second, Log: quiet,
		RealtimeKeyNamespace: ns, Reconcile: decision.Config{RealtimeEnabled: true}, RunNetworkPolicy: &gw})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// runPolicyOf reads the NetworkPolicy of the run of Agent a.
func runPolicyOf(t *testing.T, a *agentsv1alpha1.Agent) *networkingv1.NetworkPolicy {
	t.Helper()
	np, err := env.Kube.NetworkingV1().NetworkPolicies(a.Namespace).Get(context.Background(), runpolicy.Name(string(a.UID)), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the run's NetworkPolicy: %v", err)
	}
	return np
}

// TestEveryRunGetsANetworkPolicyOfItsOwn: a Job run and a realtime run each
// get, with their Job, the NetworkPolicy runpolicy.For describes, stored
// as built, selecting the Job's pod and controlled by the Agent, so that
// deleting the Agent removes it.
func TestEveryRunGetsANetworkPolicyOfItsOwn(t *testing.T) {
	cases := []struct {
		rule string
		mode agentsv1alpha1.ExecutionMode
		// ingress is how many ingress rules the stored policy has.
		ingress int
	}{
		{"a Job run's pod admits nothing", agentsv1alpha1.ExecutionJob, 0},
		{"a realtime run's pod admits the gateway on its session port", agentsv1alpha1.ExecutionRealtime, 1},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			ns := env.Namespace(t)
			mkStation(t, ns, "st", nil)
			setExecution(t, ns, "st-def", c.mode)
			startWithRunPolicy(t, ns)
			mkAgent(t, ns, "run", "st")
			a := waitPhase(t, ns, "run", agentsv1alpha1.PhaseRunning)
			job := jobOf(t, a)
			np := runPolicyOf(t, a)
			if want := runpolicy.For(a, job, testGateway); !equality.Semantic.DeepEqual(np.Spec, want.Spec) {
				t.Errorf("stored spec %+v, want %+v", np.Spec, want.Spec)
			}
			if len(np.Spec.Ingress) != c.ingress {
				t.Errorf("%d ingress rules, want %d", len(np.Spec.Ingress), c.ingress)
			}
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil || !sel.Matches(labels.Set(job.Spec.Template.Labels)) {
				t.Errorf("the policy %v does not select the Job's pod %v (%v)", np.Spec.PodSelector, job.Spec.Template.Labels, err)
			}
			if !metav1.IsControlledBy(np, a) {
				t.Errorf("owners %+v, want the Agent as controller", np.OwnerReferences)
			}
			if err := env.Client.Delete(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the policy garbage-collected with its Agent", func() bool {
				_, err := env.Kube.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), np.Name, metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			})
		})
	}
}

// setExecution sets the execution mode of an AgentDefinition.
func setExecution(t *testing.T, ns, def string, mode agentsv1alpha1.ExecutionMode) {
	t.Helper()
	d := &agentsv1alpha1.AgentDefinition{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: def}, d); err != nil {
		t.Fatal(err)
	}
	d.Spec.Execution = mode
	if err := env.Client.Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

// TestARunsPodNeverStartsWithoutItsNetworkPolicy: while the policy cannot
// be created (a quota of none refuses it), the run stays Pending, shows
// why, and has no Job; it starts, guarded, once the policy can be made.
func TestARunsPodNeverStartsWithoutItsNetworkPolicy(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-policies", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/networkpolicies.networking.k8s.io": resource.MustParse("0")}}}
	if _, err := env.Kube.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the quota's usage", func() bool {
		q, err := env.Kube.CoreV1().ResourceQuotas(ns).Get(ctx, "no-policies", metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil
	})
	mkStation(t, ns, "st", nil)
	startWithRunPolicy(t, ns)
	mkAgent(t, ns, "waits", "st")
	eventually(t, "the policy's refusal on the Agent", func() bool {
		c := meta.FindStatusCondition(getAgent(t, ns, "waits").Status.Conditions, agentsv1alpha1.ConditionStarted)
		return c != nil && c.Reason == agentsv1alpha1.ReasonRetrying && strings.Contains(c.Message, "NetworkPolicy")
	})
	if jobs, err := env.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); err != nil || len(jobs.Items) > 0 {
		t.Fatalf("a Job exists without its run's NetworkPolicy: %v (%v)", jobs, err)
	}
	if err := env.Kube.CoreV1().ResourceQuotas(ns).Delete(ctx, "no-policies", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a := waitPhase(t, ns, "waits", agentsv1alpha1.PhaseRunning)
	runPolicyOf(t, a)
}

// TestATakenPolicyNameIsRestoredOrLeftAlone is the attack of a namespace
// user who writes the run's NetworkPolicy first, under its name, opening
// the run's pod to everyone. One claiming the Agent as its controller is
// set back to the run's spec before the Job; one the Agent does not
// control is left alone and the run goes on, since NetworkPolicies are
// additive: that user could open the pod with a policy of any other name.
func TestATakenPolicyNameIsRestoredOrLeftAlone(t *testing.T) {
	openToAll := networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(realtime.Port))}}}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
	}
	cases := []struct {
		rule     string
		owner    func(a *agentsv1alpha1.Agent) []metav1.OwnerReference
		restored bool
	}{
		{"a policy claiming the Agent as controller is set back to the run's spec", func(a *agentsv1alpha1.Agent) []metav1.OwnerReference {
			return []metav1.OwnerReference{*controllerRef(a)}
		}, true},
		{"a policy the Agent does not control is left alone and the run starts", func(*agentsv1alpha1.Agent) []metav1.OwnerReference { return nil }, false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			ns := env.Namespace(t)
			mkStation(t, ns, "st", nil)
			setExecution(t, ns, "st-def", agentsv1alpha1.ExecutionRealtime)
			mkAgent(t, ns, "talk", "st")
			a := getAgent(t, ns, "talk")
			planted := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: runpolicy.Name(string(a.UID)), Namespace: ns,
				OwnerReferences: c.owner(a)}, Spec: openToAll}
			if _, err := env.Kube.NetworkingV1().NetworkPolicies(ns).Create(context.Background(), planted, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			startWithRunPolicy(t, ns)
			a = waitPhase(t, ns, "talk", agentsv1alpha1.PhaseRunning)
			np := runPolicyOf(t, a)
			if c.restored {
				if want := runpolicy.For(a, jobOf(t, a), testGateway).Spec; !equality.Semantic.DeepEqual(np.Spec, want) {
					t.Errorf("the planted spec was kept: %+v", np.Spec)
				}
				return
			}
			if !equality.Semantic.DeepEqual(np.Spec, openToAll) {
				t.Errorf("a policy the run does not control was rewritten: %+v", np.Spec)
			}
		})
	}
}

// jobOf is the Job a Running Agent's status names.
func jobOf(t *testing.T, a *agentsv1alpha1.Agent) *batchv1.Job {
	t.Helper()
	job, err := env.Kube.BatchV1().Jobs(a.Namespace).Get(context.Background(), a.Status.JobName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job
}
