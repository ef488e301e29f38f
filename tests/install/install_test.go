package install

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/tests/internal/charts"
)

// deployments are what the install must bring up, each from its image.
var deployments = []string{"agent-controller", "batch-poller", "realtime-gateway", "omnia-controllers"}

// installValues turns every component on and points batch-poller at
// fakevendor; a short poll keeps the batch run quick.
func installValues(logLevel string) map[string]any {
	vendor := fmt.Sprintf("http://fakevendor.%s.svc", vendorNS)
	return map[string]any{
		"global": map[string]any{
			"batch":    map[string]any{"enabled": true},
			"realtime": map[string]any{"enabled": true},
			"omnia":    map[string]any{"enabled": true},
		},
		"agent-controller": map[string]any{"logLevel": logLevel, "batch": map[string]any{"pollSeconds": 1}},
		"batch-poller": map[string]any{"logLevel": logLevel, "batchPollSeconds": 1,
			"anthropicBaseUrl": vendor + "/", "openaiBaseUrl": vendor + "/v1/", "geminiBaseUrl": vendor + "/"},
		"realtime-gateway":  map[string]any{"logLevel": logLevel},
		"omnia-controllers": map[string]any{"logLevel": logLevel},
	}
}

// The install, as a platform engineer does it, then runs of every kind
// through it, an upgrade and an uninstall. Each step needs the one before.
func TestInstallRunUpgradeUninstall(t *testing.T) {
	ch := charts.LoadUmbrella(t)
	namespace(t, releaseNS)
	namespace(t, vendorNS)
	realtimeKey(t)
	fakevendor(t)

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"helm install brings every service up as a pod from its image", func(t *testing.T) {
			_, took := helmInstall(t, ch, installValues("info"))
			t.Logf("FIGURE install-to-ready: %s (helm install --wait, %d Deployments)", took.Round(100*time.Millisecond), len(deployments))
			for _, d := range deployments {
				runsFromItsImage(t, waitDeploymentReady(t, releaseNS, d, time.Minute), d)
			}
			leaderIsAPod(t)
		}},
		{"a Job run succeeds through the installed platform", func(t *testing.T) { jobRun(t, "team-a", "first") }},
		{"a batch run succeeds through batch-poller and fakevendor", func(t *testing.T) { batchRun(t, "team-a", "summary") }},
		{"a realtime prompt succeeds through realtime-gateway", func(t *testing.T) { realtimeRun(t, "team-a", "talk") }},
		{"helm upgrade with a changed value rolls the Deployments and runs keep working", func(t *testing.T) {
			before := podTemplateHashes(t)
			_, took := helmUpgrade(t, ch, installValues("debug"))
			t.Logf("FIGURE upgrade-to-ready: %s (helm upgrade --wait, log level info -> debug)", took.Round(100*time.Millisecond))
			for _, d := range deployments {
				dep := waitDeploymentReady(t, releaseNS, d, time.Minute)
				if !hasArg(dep, "--log-level=debug") {
					t.Errorf("%s: the upgrade's value is not in the pod template: %v", d, dep.Spec.Template.Spec.Containers[0].Args)
				}
				rolled(t, d, before[d])
				runsFromItsImage(t, dep, d)
			}
			jobRun(t, "team-a", "after-upgrade")
			batchRun(t, "team-a", "summary-after-upgrade")
		}},
		{"helm uninstall leaves nothing but the CRDs", func(t *testing.T) {
			helmUninstall(t)
			onlyCRDsRemain(t)
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
}

// runsFromItsImage checks every pod of the Deployment runs its service's
// image and that the node ran it from that image (an image ID that is a
// digest, not the host-mode placeholder).
func runsFromItsImage(t *testing.T, d *appsv1.Deployment, name string) {
	t.Helper()
	pods := podsOf(t, d)
	if len(pods) == 0 {
		t.Fatalf("%s: no pods", name)
	}
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Image != image(name) || !strings.HasPrefix(cs.ImageID, "sha256:") || !cs.Ready {
				t.Errorf("%s: pod %s container %s: image %q id %q ready %v; want %s from its image", name, p.Name, cs.Name, cs.Image, cs.ImageID, cs.Ready, image(name))
			}
		}
		if p.Status.PodIP == "" || p.Status.PodIP == "127.0.0.1" {
			t.Errorf("%s: pod %s has no address of its own (%q)", name, p.Name, p.Status.PodIP)
		}
	}
}

// leaderIsAPod checks that one agent-controller pod holds the Lease: it
// talked to the API server with its own ServiceAccount token and the
// chart's RBAC let it.
func leaderIsAPod(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		l, err := env.Kube.CoordinationV1().Leases(releaseNS).Get(context.Background(), "agent-controller", metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil && strings.HasPrefix(*l.Spec.HolderIdentity, "agent-controller-") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agent-controller pod holds the Lease: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func podsOf(t *testing.T, d *appsv1.Deployment) []corev1.Pod {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := env.Kube.CoreV1().Pods(d.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

func podTemplateHashes(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	for _, name := range deployments {
		d, err := env.Kube.AppsV1().Deployments(releaseNS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[name] = map[string]bool{}
		for _, p := range podsOf(t, d) {
			out[name][p.Name] = true
		}
	}
	return out
}

// rolled checks that none of the Deployment's pods is one from before.
func rolled(t *testing.T, name string, before map[string]bool) {
	t.Helper()
	d, err := env.Kube.AppsV1().Deployments(releaseNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range podsOf(t, d) {
		if before[p.Name] {
			t.Errorf("%s: pod %s survived the upgrade; the Deployment did not roll", name, p.Name)
		}
	}
}

func hasArg(d *appsv1.Deployment, arg string) bool {
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if a == arg {
			return true
		}
	}
	return false
}

func jobRun(t *testing.T, ns, name string) {
	t.Helper()
	tenant(t, ns)
	recipe(t, ns, "fixer", agentsv1alpha1.ExecutionJob)
	launch(t, ns, name, "fixer")
	a := waitFor(t, ns, name, 3*time.Minute, "a terminal phase", terminal)
	succeeded(t, a)
	if a.Status.JobName == "" || a.Status.Output == "" || a.Status.ExitCode == nil || *a.Status.ExitCode != 0 {
		t.Fatalf("a Job run records its Job, exit code 0 and output: %+v", a.Status)
	}
}

func batchRun(t *testing.T, ns, name string) {
	t.Helper()
	tenant(t, ns)
	recipe(t, ns, "summariser", agentsv1alpha1.ExecutionBatch)
	launch(t, ns, name, "summariser")
	a := waitFor(t, ns, name, 3*time.Minute, "a terminal phase with its batch cleaned up", func(a *agentsv1alpha1.Agent) bool {
		return terminal(a) && len(a.Finalizers) == 0
	})
	succeeded(t, a)
	if a.Status.BatchID == "" || a.Status.BatchProvider != agentsv1alpha1.BatchProviderAnthropic || a.Status.JobName != "" || a.Status.Output == "" {
		t.Fatalf("a batch run has an Anthropic batch, its output and no Job: %+v", a.Status)
	}
}

func realtimeRun(t *testing.T, ns, name string) {
	t.Helper()
	tenant(t, ns)
	recipe(t, ns, "chat", agentsv1alpha1.ExecutionRealtime)
	launch(t, ns, name, "chat")
	waitFor(t, ns, name, 3*time.Minute, "Running", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase == agentsv1alpha1.PhaseRunning })
	token := caller(t, ns, "prompter")

	svc, err := env.Kube.CoreV1().Services(releaseNS).Get(context.Background(), "realtime-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var port int32
	for _, p := range svc.Spec.Ports {
		if p.Name == "grpc" {
			port = p.Port
		}
	}
	conn, err := grpc.NewClient(fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	c := realtimev1.NewPromptServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
	ref := &realtimev1.AgentRef{Namespace: ns, Name: name}

	deadline := time.Now().Add(2 * time.Minute)
	var ended bool
	for !ended {
		s, err := c.Prompt(ctx, &realtimev1.PromptRequest{Agent: ref, Text: "hello"})
		for err == nil {
			var r *realtimev1.PromptResponse
			if r, err = s.Recv(); err == nil && r.GetTurnEnd() != nil {
				ended = true
			}
		}
		if ended {
			break
		}
		if code := status.Code(err); (code != codes.Unavailable && code != codes.FailedPrecondition) || time.Now().After(deadline) {
			t.Fatalf("prompt through the gateway: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if _, err := c.Close(ctx, &realtimev1.CloseRequest{Agent: ref}); err != nil {
		t.Fatalf("close: %v", err)
	}
	a := waitFor(t, ns, name, 2*time.Minute, "a terminal phase", terminal)
	succeeded(t, a)
	if a.Status.SessionID == "" {
		t.Fatalf("a realtime run ends with its sessionId: %+v", a.Status)
	}
}

// onlyCRDsRemain checks the release left no object behind: nothing
// labelled as the release's in its namespace or cluster-wide, no release
// record, while the CRDs (kept by policy) and with them the runs stay.
func onlyCRDsRemain(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + releaseName}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var left []string
		k := env.Kube
		if l, err := k.AppsV1().Deployments(releaseNS).List(ctx, sel); err == nil {
			for _, o := range l.Items {
				left = append(left, "Deployment "+o.Name)
			}
		}
		if l, err := k.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{}); err == nil {
			for _, o := range l.Items {
				left = append(left, "Pod "+o.Name)
			}
		}
		if l, err := k.CoreV1().Services(releaseNS).List(ctx, metav1.ListOptions{}); err == nil {
			for _, o := range l.Items {
				left = append(left, "Service "+o.Name)
			}
		}
		if l, err := k.CoreV1().ServiceAccounts(releaseNS).List(ctx, sel); err == nil {
			for _, o := range l.Items {
				left = append(left, "ServiceAccount "+o.Name)
			}
		}
		if l, err := k.CoreV1().ConfigMaps(releaseNS).List(ctx, sel); err == nil {
			for _, o := range l.Items {
				left = append(left, "ConfigMap "+o.Name)
			}
		}
		if l, err := k.CoreV1().Secrets(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"}); err == nil {
			for _, o := range l.Items {
				left = append(left, "release record "+o.Name)
			}
		}
		if l, err := k.RbacV1().Roles(releaseNS).List(ctx, sel); err == nil {
			for _, o := range l.Items {
				left = append(left, "Role "+o.Name)
			}
		}
		if l, err := k.RbacV1().RoleBindings(releaseNS).List(ctx, sel); err == nil {
			for _, o := range l.Items {
				left = append(left, "RoleBinding "+o.Name)
			}
		}
		if l, err := k.RbacV1().ClusterRoles().List(ctx, sel); err == nil {
			for _, o := range l.Items {
				left = append(left, "ClusterRole "+o.Name)
			}
		}
		if l, err := k.RbacV1().ClusterRoleBindings().List(ctx, sel); err == nil {
			for _, o := range l.Items {
				left = append(left, "ClusterRoleBinding "+o.Name)
			}
		}
		if l, err := k.PolicyV1().PodDisruptionBudgets(releaseNS).List(ctx, sel); err == nil {
			for _, o := range l.Items {
				left = append(left, "PodDisruptionBudget "+o.Name)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left after helm uninstall: %v", left)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, crd := range []string{"agents.agents.re-cinq.com", "stations.agents.re-cinq.com", "agentdefinitions.agents.re-cinq.com", "agentruntimes.omnia.altairalabs.ai"} {
		var c apiextensionsv1.CustomResourceDefinition
		if err := env.Client.Get(ctx, types.NamespacedName{Name: crd}, &c); err != nil {
			t.Errorf("CRD %s must survive uninstall: %v", crd, err)
		}
	}
	var a agentsv1alpha1.Agent
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "first"}, &a); err != nil {
		t.Errorf("the runs stay with their CRDs: %v", err)
	}
}
