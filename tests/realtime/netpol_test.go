package realtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/tests/internal/charts"
)

// natsNS is where deploy/components/nats-network-policy expects the NATS
// server.
const natsNS = "messaging"

// peer is one pod of the attack matrix: its namespace and labels as the
// cluster has them, and its port by name.
type peer struct {
	ns     string
	labels map[string]string
	// port and portName are what the pod listens on, for a destination.
	port     int
	portName string
}

// TestNetworkPoliciesAdmitOnlyWhatMustConnect evaluates every NetworkPolicy
// of an install with a NetworkPolicy evaluator (cyclonus's matcher, which
// implements the semantics of the Kubernetes API), since the local stack's
// pod network does not enforce them: the charts' policies as Helm renders
// the umbrella chart into agentplane-system, the NATS component's from
// deploy/components, and the run pods' as the agent-controller created them
// in the API server for a realtime run and a Job run it started. Each row
// is one connection an attacker (or a component) makes; pods carry the
// labels the API server and the charts give them. The run-pod rows are
// then evaluated again without the controller's policies, where they must
// be admitted: the controller's policies are what refuses them.
func TestNetworkPoliciesAdmitOnlyWhatMustConnect(t *testing.T) {
	ctx := context.Background()
	ns := suite.Env.Namespace(t)
	recipe(t, ns, "chat", nil)
	recipe(t, ns, "once", func(s *agentsv1alpha1.AgentDefinitionSpec) { s.Execution = agentsv1alpha1.ExecutionJob })
	token := caller(t, ns, "alice", true)
	launch(t, ns, "talk", "chat", "")
	launch(t, ns, "work", "once", "")
	// The realtime session answers through the gateway, then ends, so the
	// node's :8090 is free for the next test.
	c := promptClient(t)
	promptWhenReady(t, c, token, ns, "talk", "hello")
	talk := runPod(t, ns, waitFor(t, ns, "talk", time.Minute, "Running", func(a *agentsv1alpha1.Agent) bool { return a.Status.JobName != "" }))
	if _, err := c.Close(as(token), &realtimev1.CloseRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: "talk"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ns, "talk", time.Minute, "terminal", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() })
	work := runPod(t, ns, waitFor(t, ns, "work", time.Minute, "terminal", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() }))

	stored, err := suite.Env.Kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var runPolicies []*networkingv1.NetworkPolicy
	for i := range stored.Items {
		runPolicies = append(runPolicies, &stored.Items[i])
	}
	if len(runPolicies) != 2 {
		t.Errorf("the run namespace holds %d NetworkPolicies, want its two run policies (Job runs, realtime runs)", len(runPolicies))
	}
	install, deployments := renderInstall(t)
	install = append(install, natsPolicy(t))

	nsLabels := namespaceLabels(t, ns, platformNS, natsNS)
	other := suite.Env.Namespace(t)
	nsLabels[other] = namespaceLabels(t, other)[other]
	pod := func(namespace string, labels map[string]string) peer {
		return peer{ns: namespace, labels: labels}
	}
	system := func(name string) peer {
		d := deployments[name]
		if d == nil {
			t.Fatalf("the install renders no Deployment %s", name)
		}
		p := pod(platformNS, d.Spec.Template.Labels)
		for _, cp := range d.Spec.Template.Spec.Containers[0].Ports {
			if cp.Name == "grpc" {
				p.port, p.portName = int(cp.ContainerPort), cp.Name
			}
		}
		return p
	}
	controller, poller, gateway := system("agent-controller"), system("batch-poller"), system("realtime-gateway")
	tenant := pod(other, map[string]string{"app": "tenant"})
	neighbour := pod(ns, map[string]string{"app": "tenant"})
	fakeGateway := pod(other, gateway.labels)
	nats := peer{ns: natsNS, labels: map[string]string{"app.kubernetes.io/name": "nats", "app.kubernetes.io/component": "nats",
		"app.kubernetes.io/instance": "nats"}, port: 4222, portName: "client"}
	kustomizeController := pod(platformNS, kustomizePodLabels(t, "agent-controller"))
	atPort := func(p peer, port int, name string) peer { p.port, p.portName = port, name; return p }
	talkSession, workSession := atPort(talk, realtime.Port, realtime.PortName), atPort(work, realtime.Port, realtime.PortName)

	rows := []struct {
		rule     string
		from, to peer
		allowed  bool
		// runPod marks the rows the run pods' own policies decide.
		runPod bool
	}{
		{"a tenant pod of another namespace cannot reach a realtime run's session port", tenant, talkSession, false, true},
		{"a tenant pod labelled as the gateway, in its own namespace, cannot reach a realtime run's session port", fakeGateway, talkSession, false, true},
		{"a tenant pod of the run's own namespace cannot reach a realtime run's session port", neighbour, talkSession, false, true},
		{"the gateway reaches a realtime run's session port", gateway, talkSession, true, false},
		{"the gateway reaches no other port of a realtime run", gateway, atPort(talk, 8080, "metrics"), false, true},
		{"nothing reaches a Job run: not the gateway", gateway, workSession, false, true},
		{"nothing reaches a Job run: not the agent-controller", controller, atPort(work, 8080, "metrics"), false, true},
		{"nothing reaches a Job run: not a pod of its own namespace", neighbour, atPort(work, 22, "ssh"), false, true},
		{"a tenant pod cannot call batch-poller", tenant, poller, false, false},
		{"a tenant pod of the install's namespace cannot call batch-poller", pod(platformNS, map[string]string{"app": "other"}), poller, false, false},
		{"the agent-controller calls batch-poller", controller, poller, true, false},
		{"a tenant pod reaches the gateway's public gRPC port", tenant, gateway, true, false},
		{"a tenant pod cannot reach NATS", tenant, nats, false, false},
		{"a pod of the install's namespace that is no agentplane service cannot reach NATS", pod(platformNS, map[string]string{"app": "other"}), nats, false, false},
		{"the gateway, which uses no NATS, cannot reach it", gateway, nats, false, false},
		{"a realtime run pod reaches NATS", talk, nats, true, false},
		{"a Job run pod reaches NATS", work, nats, true, false},
		{"the agent-controller reaches NATS", controller, nats, true, false},
		{"batch-poller reaches NATS", poller, nats, true, false},
		{"the agent-controller of a kustomize install reaches NATS", kustomizeController, nats, true, false},
		{"a tenant cannot reach NATS's cluster port", tenant, atPort(nats, 6222, "cluster"), false, false},
		{"a run pod cannot reach NATS's monitoring port", work, atPort(nats, 8222, "monitor"), false, false},
	}
	withRuns := matcher.BuildNetworkPolicies(false, append(append([]*networkingv1.NetworkPolicy(nil), install...), runPolicies...))
	withoutRuns := matcher.BuildNetworkPolicies(false, install)
	for _, r := range rows {
		t.Run(r.rule, func(t *testing.T) {
			tr := traffic(r.from, r.to, nsLabels)
			if got := withRuns.IsTrafficAllowed(tr); got.IsAllowed() != r.allowed {
				t.Errorf("allowed = %v, want %v\n%s", got.IsAllowed(), r.allowed, got.Table())
			}
			if r.runPod && !withoutRuns.IsTrafficAllowed(tr).IsAllowed() {
				t.Error("refused even without the run pods' policies: the row does not test them")
			}
		})
	}
}

// traffic is a TCP connection from one pod to another's port.
func traffic(from, to peer, nsLabels map[string]map[string]string) *matcher.Traffic {
	internal := func(p peer) *matcher.TrafficPeer {
		return &matcher.TrafficPeer{Internal: &matcher.InternalPeer{PodLabels: p.labels, NamespaceLabels: nsLabels[p.ns], Namespace: p.ns}}
	}
	return &matcher.Traffic{Source: internal(from), Destination: internal(to),
		ResolvedPort: to.port, ResolvedPortName: to.portName, Protocol: corev1.ProtocolTCP}
}

// runPod waits for the pod of a's Job and returns it as a peer, with the
// labels the Job controller gave it.
func runPod(t *testing.T, ns string, a *agentsv1alpha1.Agent) peer {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		pods, err := suite.Env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + a.Status.JobName})
		if err == nil && len(pods.Items) > 0 {
			return peer{ns: ns, labels: pods.Items[0].Labels}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pod of Job %s: %v", a.Status.JobName, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// namespaceLabels reads the labels the API server gives each namespace,
// creating those that do not exist yet.
func namespaceLabels(t *testing.T, names ...string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, n := range names {
		got, err := suite.Env.Kube.CoreV1().Namespaces().Get(context.Background(), n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			got, err = suite.Env.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		out[n] = got.Labels
	}
	return out
}

// renderInstall renders the umbrella chart with batch and realtime on into
// agentplane-system, as docs/install.md installs it, and returns its
// NetworkPolicies and its Deployments by name.
func renderInstall(t *testing.T) ([]*networkingv1.NetworkPolicy, map[string]*appsv1.Deployment) {
	t.Helper()
	ch := charts.LoadUmbrella(t)
	docs, err := charts.Render(ch, "agentplane", platformNS, kubeassets.KubeVersion, "global: {batch: {enabled: true}, realtime: {enabled: true}}")
	if err != nil {
		t.Fatal(err)
	}
	var policies []*networkingv1.NetworkPolicy
	deployments := map[string]*appsv1.Deployment{}
	for _, doc := range docs {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "NetworkPolicy":
			np := &networkingv1.NetworkPolicy{}
			if err := yaml.UnmarshalStrict([]byte(doc), np); err != nil {
				t.Fatal(err)
			}
			policies = append(policies, np)
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := yaml.Unmarshal([]byte(doc), d); err != nil {
				t.Fatal(err)
			}
			deployments[d.Name] = d
		}
	}
	if len(policies) < 3 {
		t.Fatalf("the install renders %d NetworkPolicies, want one per service at least", len(policies))
	}
	return policies, deployments
}

// natsPolicy reads the NATS server's policy from its kustomize component.
func natsPolicy(t *testing.T) *networkingv1.NetworkPolicy {
	t.Helper()
	np := &networkingv1.NetworkPolicy{}
	if err := yaml.UnmarshalStrict(readRepoFile(t, "deploy/components/nats-network-policy/networkpolicy.yaml"), np); err != nil {
		t.Fatal(err)
	}
	if np.Namespace != natsNS {
		t.Fatalf("the NATS policy is in namespace %q, want %q", np.Namespace, natsNS)
	}
	return np
}

// kustomizePodLabels reads the pod labels of a service's Deployment in
// deploy/.
func kustomizePodLabels(t *testing.T, service string) map[string]string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := yaml.Unmarshal(readRepoFile(t, filepath.Join("deploy", service, "deployment.yaml")), d); err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Labels) == 0 {
		t.Fatalf("deploy/%s's pods have no labels", service)
	}
	return d.Spec.Template.Labels
}

func readRepoFile(t *testing.T, path string) []byte {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
