package controller

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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

// runPolicyOf reads the namespace policy that guards the run of the
// Running Agent a.
func runPolicyOf(t *testing.T, a *agentsv1alpha1.Agent) *networkingv1.NetworkPolicy {
	t.Helper()
	name := runpolicy.For(a.Namespace, jobOf(t, a), testGateway).Name
	np, err := env.Kube.NetworkingV1().NetworkPolicies(a.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the run's NetworkPolicy %s: %v", name, err)
	}
	return np
}

// TestRunsAreGuardedByTheirNamespacesPolicy: a Job run and a realtime run
// each start once the namespace policy runpolicy.For describes is stored
// as built and selects the Job's pod; a second run of the same mode
// writes nothing more, and the policy, the namespace's, stays when the
// Agents go.
func TestRunsAreGuardedByTheirNamespacesPolicy(t *testing.T) {
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
			ctx := context.Background()
			ns := env.Namespace(t)
			mkStation(t, ns, "st", nil)
			setExecution(t, ns, "st-def", c.mode)
			startWithRunPolicy(t, ns)
			mkAgent(t, ns, "run", "st")
			a := waitPhase(t, ns, "run", agentsv1alpha1.PhaseRunning)
			job := jobOf(t, a)
			np := runPolicyOf(t, a)
			if want := runpolicy.For(ns, job, testGateway); !equality.Semantic.DeepEqual(np.Spec, want.Spec) {
				t.Errorf("stored spec %+v, want %+v", np.Spec, want.Spec)
			}
			if len(np.Spec.Ingress) != c.ingress {
				t.Errorf("%d ingress rules, want %d", len(np.Spec.Ingress), c.ingress)
			}
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil || !sel.Matches(labels.Set(job.Spec.Template.Labels)) {
				t.Errorf("the policy %v does not select the Job's pod %v (%v)", np.Spec.PodSelector, job.Spec.Template.Labels, err)
			}
			mkAgent(t, ns, "again", "st")
			second := waitPhase(t, ns, "again", agentsv1alpha1.PhaseRunning)
			if again := runPolicyOf(t, second); again.ResourceVersion != np.ResourceVersion {
				t.Errorf("the second run rewrote the policy: resourceVersion %s, was %s", again.ResourceVersion, np.ResourceVersion)
			}
			if all, err := env.Kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{}); err != nil || len(all.Items) != 1 {
				t.Errorf("the namespace holds %d NetworkPolicies after two runs of one mode, want 1 (%v)", len(all.Items), err)
			}
			for _, name := range []string{"run", "again"} {
				if err := env.Client.Delete(ctx, getAgent(t, ns, name)); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "the runs' Jobs garbage-collected", func() bool {
				jobs, err := env.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
				return err == nil && len(jobs.Items) == 0
			})
			if _, err := env.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, np.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("the namespace's policy went with its runs: %v", err)
			}
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

// TestATakenOrDeletedPolicyIsRestored is the attack of a namespace user
// on the policy that guards the namespace's runs: written first under
// its name and opened to everyone, whoever it claims as owner, it is set
// back to the controller's spec before the run's Job; deleted, it is
// made again before the Job of the first run to start a poll interval
// later.
func TestATakenOrDeletedPolicyIsRestored(t *testing.T) {
	openToAll := networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(realtime.Port))}}}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
	}
	cases := []struct {
		rule  string
		owner func(a *agentsv1alpha1.Agent) []metav1.OwnerReference
	}{
		{"a policy claiming the Agent as controller is set back to the controller's spec", func(a *agentsv1alpha1.Agent) []metav1.OwnerReference {
			return []metav1.OwnerReference{*controllerRef(a)}
		}},
		{"a policy claiming no owner is set back all the same: the name is the controller's", func(*agentsv1alpha1.Agent) []metav1.OwnerReference { return nil }},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			ns := env.Namespace(t)
			mkStation(t, ns, "st", nil)
			setExecution(t, ns, "st-def", agentsv1alpha1.ExecutionRealtime)
			mkAgent(t, ns, "talk", "st")
			a := getAgent(t, ns, "talk")
			planted := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: runpolicy.RealtimeRunsName, Namespace: ns,
				OwnerReferences: c.owner(a)}, Spec: openToAll}
			if _, err := env.Kube.NetworkingV1().NetworkPolicies(ns).Create(context.Background(), planted, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			startWithRunPolicy(t, ns)
			a = waitPhase(t, ns, "talk", agentsv1alpha1.PhaseRunning)
			np := runPolicyOf(t, a)
			want := runpolicy.For(ns, jobOf(t, a), testGateway)
			if !equality.Semantic.DeepEqual(np.Spec, want.Spec) {
				t.Errorf("the planted spec was kept: %+v", np.Spec)
			}
			for k, v := range want.Labels {
				if np.Labels[k] != v {
					t.Errorf("label %s is %q, want %q", k, np.Labels[k], v)
				}
			}
		})
	}
	t.Run("a deleted policy is made again before the next run's Job", func(t *testing.T) {
		ctx := context.Background()
		ns := env.Namespace(t)
		mkStation(t, ns, "st", nil)
		startWithRunPolicy(t, ns)
		mkAgent(t, ns, "first", "st")
		first := waitPhase(t, ns, "first", agentsv1alpha1.PhaseRunning)
		np := runPolicyOf(t, first)
		if err := env.Kube.NetworkingV1().NetworkPolicies(ns).Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Past the poll interval (2 s here), the next start reads it again.
		time.Sleep(3 * time.Second)
		mkAgent(t, ns, "next", "st")
		next := waitPhase(t, ns, "next", agentsv1alpha1.PhaseRunning)
		again := runPolicyOf(t, next)
		if again.UID == np.UID {
			t.Fatal("the deleted policy is still there")
		}
		if again.CreationTimestamp.After(jobOf(t, next).CreationTimestamp.Time) {
			t.Errorf("the policy was made again at %s, after the run's Job (%s)", again.CreationTimestamp, jobOf(t, next).CreationTimestamp)
		}
	})
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

// requestCounter counts the requests a client sends whose path holds
// part.
type requestCounter struct {
	next http.RoundTripper
	part string
	n    atomic.Int64
}

// RoundTrip counts r when its path holds the part and sends it on.
func (rc *requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, rc.part) {
		rc.n.Add(1)
	}
	return rc.next.RoundTrip(r)
}

// TestStartsAtOnceMakeTheNamespacesPolicyOnce: the starts of a burst that
// all need the namespace's policy before any has made it wait on one
// create rather than each sending its own (and reading it back after
// being refused as a duplicate).
func TestStartsAtOnceMakeTheNamespacesPolicyOnce(t *testing.T) {
	ns := env.Namespace(t)
	counter := &requestCounter{part: "/networkpolicies"}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { counter.next = next; return counter })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	gw := testGateway
	ctl := New(c, kube, metrics.New(), Options{Namespace: ns, PollInterval: time.Minute, Log: quiet, RunNetworkPolicy: &gw})
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("a-%d", i)}}
			if err := ctl.ensureRunPolicy(context.Background(), a, &batchv1.Job{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := counter.n.Load(); n != 1 {
		t.Errorf("32 starts at once sent %d requests for the namespace's policy, want 1", n)
	}
	if all, err := env.Kube.NetworkingV1().NetworkPolicies(ns).List(context.Background(), metav1.ListOptions{}); err != nil || len(all.Items) != 1 {
		t.Errorf("the namespace holds %d NetworkPolicies, want 1 (%v)", len(all.Items), err)
	}
}
