package helm

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// warnings collects the warnings the apiserver sends back.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

// serverDryRun sends an object to the apiserver with dryRun=All: created,
// or, when it exists already (the CRDs the control plane was started
// with), applied server-side. Either way every field is validated against
// the object's schema and by admission, and nothing is stored. It returns
// the apiserver's warnings (Pod Security among them).
func serverDryRun(t *testing.T, obj *unstructured.Unstructured) ([]string, error) {
	t.Helper()
	e := cluster(t)
	w := &warnings{}
	cfg := rest.CopyConfig(e.Config)
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gvk := obj.GroupVersionKind()
	mapping, err := e.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	ctx := context.Background()
	_, err = ri.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
	if apierrors.IsAlreadyExists(err) {
		_, err = ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{
			DryRun: []string{metav1.DryRunAll}, FieldManager: "helm-chart-test", Force: true})
	}
	return w.msgs, err
}

// restrictedNamespace creates a namespace that enforces the restricted Pod
// Security Standard (and warns about it, which is what a Deployment draws).
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	e := cluster(t)
	ns := e.Namespace(t)
	n, err := e.Kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	n.Labels["pod-security.kubernetes.io/warn"] = "restricted"
	if _, err := e.Kube.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// prometheusOperator is the release whose ServiceMonitor CRD the charts'
// ServiceMonitors are checked against. Its module ships the CRDs under
// example/prometheus-operator-crd.
const prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

// installServiceMonitorCRD installs the Prometheus Operator's own
// ServiceMonitor CRD, fetched through the Go module proxy, so that the
// charts' ServiceMonitors are validated against the real schema.
func installServiceMonitorCRD(t *testing.T) {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", prometheusOperator)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", prometheusOperator, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", prometheusOperator, err, mod.Error)
	}
	raw, err := os.ReadFile(filepath.Join(mod.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	e := cluster(t)
	if err := e.Client.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := e.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}, "v1"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the ServiceMonitor CRD is not served")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestUmbrellaIsAcceptedByTheAPIServer renders the umbrella chart with
// every service and every optional object on, NATS authentication
// included, and sends each object to a real kube-apiserver (server-side
// dry run), the ServiceMonitors against the Prometheus Operator's own CRD.
func TestUmbrellaIsAcceptedByTheAPIServer(t *testing.T) {
	installServiceMonitorCRD(t)
	ns := restrictedNamespace(t)
	optional := "" +
		"  serviceMonitor: {enabled: true, interval: 30s}\n" +
		"  networkPolicy: {enabled: true, metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]}\n" +
		"  extraEnv: [{name: GOMEMLIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory}}}]\n" +
		"  affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 50, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app.kubernetes.io/part-of: agentplane}}}}]}}\n" +
		"  tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]\n"
	values := "global: {batch: {enabled: true}, realtime: {enabled: true}, omnia: {enabled: true}, natsUrl: 'nats://nats:4222'}\n"
	for _, c := range serviceCharts {
		values += c + ":\n" + optional
		if c == "realtime-gateway" {
			values += "  tls: {secretName: gateway-tls}\n  service: {type: LoadBalancer}\n"
		}
		// The NATS Secrets, mounted, and the signing key's account
		// variable.
		switch c {
		case "agent-controller":
			values += "  nats: {credentialsSecret: nats-ac, caSecret: nats-ca, accountSigningKeySecret: nats-account}\n"
		case "batch-poller":
			values += "  nats: {credentialsSecret: nats-bp}\n"
		}
	}

	r, err := renderIn(t, umbrella, ns, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	kinds := map[string]int{}
	for _, k := range r.keys() {
		obj := r.objects[k]
		kinds[obj.GetKind()]++
		t.Run(k, func(t *testing.T) {
			warns, err := serverDryRun(t, obj)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			for _, w := range warns {
				t.Errorf("warning: %s", w)
			}
		})
	}
	// Everything that was meant to be rendered was.
	for kind, n := range map[string]int{"Deployment": 4, "Service": 4, "ServiceAccount": 4, "PodDisruptionBudget": 4,
		"NetworkPolicy": 4, "ServiceMonitor": 4, "CustomResourceDefinition": 13, "ConfigMap": 6} {
		if kinds[kind] < n {
			t.Errorf("%d %s rendered, want %d", kinds[kind], kind, n)
		}
	}
}

// TestFirstRunInTheNotesIsAccepted: the recipe, the Station and the Agent
// the NOTES give for a first run are valid against the CRDs (server-side
// dry run, in a namespace of their own).
func TestFirstRunInTheNotesIsAccepted(t *testing.T) {
	ns := cluster(t).Namespace(t)
	r := mustRender(t, umbrella, "")
	var docs []string
	lines := strings.Split(r.notes, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasSuffix(lines[i], "<<'EOF'") {
			continue
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "EOF"; i++ {
			body = append(body, strings.TrimPrefix(lines[i], "  "))
		}
		docs = append(docs, strings.Split(strings.Join(body, "\n"), "\n---\n")...)
	}
	if len(docs) != 3 {
		t.Fatalf("the NOTES hold %d manifests, want 3 (AgentDefinition, Station, Agent):\n%s", len(docs), r.notes)
	}
	for _, d := range docs {
		js, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			t.Fatalf("NOTES manifest is not YAML: %v\n%s", err, d)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			t.Fatalf("NOTES manifest: %v\n%s", err, d)
		}
		obj.SetNamespace(ns)
		if _, err := serverDryRun(t, obj); err != nil {
			t.Errorf("%s %s%s refused: %v", obj.GetKind(), obj.GetName(), obj.GetGenerateName(), err)
		}
	}
}

// TestPodSecurityWarningsAreSeen is the control of the restricted check
// above: in such a namespace, a Deployment whose pods break the standard
// draws a warning, so the absence of warnings means something.
func TestPodSecurityWarningsAreSeen(t *testing.T) {
	ns := restrictedNamespace(t)
	r := mustRender(t, "batch-poller", "")
	d := r.get(t, "Deployment", releaseNS, "batch-poller").DeepCopy()
	d.SetNamespace(ns)
	ctr := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	ctr["securityContext"].(map[string]any)["allowPrivilegeEscalation"] = true
	warns, err := serverDryRun(t, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) == 0 {
		t.Fatal("no Pod Security warning for a container allowing privilege escalation")
	}
}
