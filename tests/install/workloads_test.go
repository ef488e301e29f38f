package install

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/tests/internal/runs"
)

const (
	// vendorNS runs fakevendor, standing in for the vendors' HTTPS APIs.
	vendorNS = "vendors"
	// vendorKey is the API key fakevendor accepts.
	vendorKey = "sk-install-test"
)

func image(name string) string { return "agentplane/" + name + ":" + version }

func ptrTo[T any](v T) *T { return &v }

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

func namespace(t *testing.T, name string) {
	t.Helper()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// realtimeKey creates the Secret the agent-controller derives run tokens
// with and the gateway calls run pods with, as the chart's NOTES tell the
// engineer to.
func realtimeKey(t *testing.T) {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: realtime.KeySecretName, Namespace: releaseNS},
		Data: map[string][]byte{realtime.KeySecretKey: key}})
}

// fakevendor runs tools/fakevendor from its image behind a Service, so
// batch-poller reaches it by name as it would reach a vendor.
func fakevendor(t *testing.T) {
	t.Helper()
	labels := map[string]string{"app": "fakevendor"}
	create(t,
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "fakevendor", Namespace: vendorNS},
			Spec: appsv1.DeploymentSpec{Replicas: ptrTo(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "fakevendor", Image: image("fakevendor"), ImagePullPolicy: corev1.PullNever,
						Args:  []string{"--addr=:8089", "--api-key=" + vendorKey, "--polls=1"},
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8089}}}}}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "fakevendor", Namespace: vendorNS},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}},
	)
	waitDeploymentReady(t, vendorNS, "fakevendor", 2*time.Minute)
}

// waitDeploymentReady waits until every replica of the Deployment's
// current template is ready.
func waitDeploymentReady(t *testing.T, ns, name string, within time.Duration) *appsv1.Deployment {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && d.Status.ObservedGeneration >= d.Generation && d.Spec.Replicas != nil &&
			d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.ReadyReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas {
			return d
		}
		if time.Now().After(deadline) {
			dumpPods(t, ns)
			t.Fatalf("deployment %s/%s not ready after %s: %v %+v", ns, name, within, err, d.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// tenant makes a namespace for a team's runs, with agent-secrets holding
// the vendor keys.
func tenant(t *testing.T, ns string) {
	t.Helper()
	namespace(t, ns)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: agentsv1alpha1.AgentSecretsName, Namespace: ns},
		StringData: map[string]string{"ANTHROPIC_API_KEY": vendorKey, "OPENAI_API_KEY": vendorKey, "GEMINI_API_KEY": vendorKey}})
}

// recipe creates an AgentDefinition and a Station, both named name, whose
// agent container is the mock CLIs' image.
func recipe(t *testing.T, ns, name string, exec agentsv1alpha1.ExecutionMode) {
	t.Helper()
	def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "Summarise {topic} in one line.", Execution: exec}}
	if exec == agentsv1alpha1.ExecutionBatch {
		def.Spec.Batch = &agentsv1alpha1.BatchSpec{MaxTokens: 256, TimeoutMinutes: 30}
	}
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: name, DeadlineMinutes: 10,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "agent", Image: image("mockagent"), ImagePullPolicy: corev1.PullNever}}}}}}
	create(t, def, st)
}

func launch(t *testing.T, ns, name, station string) {
	t.Helper()
	create(t, &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentSpec{StationRef: station, Parameters: map[string]string{"topic": "tides"}}})
}

// waitFor polls the Agent until cond holds.
func waitFor(t *testing.T, ns, name string, within time.Duration, what string, cond func(*agentsv1alpha1.Agent) bool) *agentsv1alpha1.Agent {
	t.Helper()
	return runs.WaitFor(t, env.Client, ns, name, within, what, cond, func() { dumpPods(t, ns); dumpPods(t, releaseNS) })
}

func terminal(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() }

// succeeded checks a terminal Agent succeeded, with its reason if not.
func succeeded(t *testing.T, a *agentsv1alpha1.Agent) {
	t.Helper()
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
		t.Fatalf("agent %s: %s (%s); output tail: %s", a.Name, a.Status.Phase, a.Status.FailureReason, tail(a.Status.Output, 800))
	}
}

// caller returns the bearer token of a ServiceAccount allowed to prompt
// the Agents of ns.
func caller(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	create(t,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{agentsv1alpha1.GroupVersion.Group}, Resources: []string{"agents/prompt"}, Verbs: []string{"create", "get"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}},
	)
	// For the gateway's audience, which the chart requires by default.
	tr, err := env.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600)), Audiences: []string{runs.GatewayAudience}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// dumpPods logs each pod's phase and the tail of its containers' logs,
// for a failure's diagnosis.
func dumpPods(t *testing.T, ns string) {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		t.Logf("pod %s/%s: %s %s", ns, p.Name, p.Status.Phase, p.Status.Message)
		for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
			raw, err := env.Kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: ptrTo(int64(15))}).DoRaw(context.Background())
			if err == nil && len(raw) > 0 {
				t.Logf("  %s:\n%s", c.Name, indent(string(raw)))
			}
		}
	}
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("...%s", s[len(s)-n:])
}
