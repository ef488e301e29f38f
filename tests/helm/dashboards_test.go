package helm

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// generatedDashboards reads deploy/dashboards (tools/dashboards writes it,
// `make generate`): file name → content.
func generatedDashboards(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated dashboards in deploy/dashboards: %v", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

// dashboardConfigMaps returns the rendered ConfigMaps that carry the
// sidecar label (label: value), by name.
func dashboardConfigMaps(r *rendered, label, value string) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, cm := range r.ofKind("ConfigMap") {
		if cm.GetLabels()[label] == value {
			out[cm.GetName()] = cm
		}
	}
	return out
}

// checkDashboards: the chart renders exactly one ConfigMap per dashboard
// of files (file names), in namespace, each named <uid>-dashboard, with
// the chart's labels and the sidecar's, holding the file of deploy/dashboards
// byte for byte under its name, a Grafana dashboard whose uid is the
// file's name.
func checkDashboards(t *testing.T, r *rendered, namespace, label, value string, files ...string) {
	t.Helper()
	gen := generatedDashboards(t)
	cms := dashboardConfigMaps(r, label, value)
	var got, want []string
	for name := range cms {
		got = append(got, name)
	}
	for _, f := range files {
		want = append(want, strings.TrimSuffix(f, ".json")+"-dashboard")
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("dashboard ConfigMaps %v, want %v", got, want)
	}
	for _, f := range files {
		cm := cms[strings.TrimSuffix(f, ".json")+"-dashboard"]
		if cm.GetNamespace() != namespace {
			t.Errorf("%s is in namespace %q, want %q", cm.GetName(), cm.GetNamespace(), namespace)
		}
		if cm.GetLabels()["app.kubernetes.io/part-of"] != "agentplane" || cm.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s lacks the chart's labels: %v", cm.GetName(), cm.GetLabels())
		}
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		if len(data) != 1 {
			t.Errorf("%s holds %d keys, want 1", cm.GetName(), len(data))
		}
		content, ok := data[f]
		if !ok {
			t.Errorf("%s has no key %s: %v", cm.GetName(), f, data)
			continue
		}
		if !bytes.Equal([]byte(content), gen[f]) {
			t.Errorf("%s/%s differs from deploy/dashboards/%s: %d bytes, not %d; first difference at %d: %q",
				cm.GetName(), f, f, len(content), len(gen[f]), firstDifference([]byte(content), gen[f]), tail([]byte(content), firstDifference([]byte(content), gen[f])))
		}
		var d struct {
			UID    string           `json:"uid"`
			Title  string           `json:"title"`
			Panels []map[string]any `json:"panels"`
		}
		if err := json.Unmarshal([]byte(content), &d); err != nil {
			t.Errorf("%s/%s is not JSON: %v", cm.GetName(), f, err)
			continue
		}
		if d.UID != strings.TrimSuffix(f, ".json") || d.Title == "" || len(d.Panels) == 0 {
			t.Errorf("%s/%s is not a dashboard: uid %q title %q, %d panels", cm.GetName(), f, d.UID, d.Title, len(d.Panels))
		}
	}
}

// TestChartDashboardsAreTheGeneratedOnes: each chart's files/dashboards
// holds, byte for byte, its dashboards of deploy/dashboards (the service
// charts their own, the umbrella every one; `make generate` writes them).
func TestChartDashboardsAreTheGeneratedOnes(t *testing.T) {
	gen := generatedDashboards(t)
	var every []string
	for f := range gen {
		every = append(every, f)
	}
	sort.Strings(every)
	want := map[string][]string{umbrella: every}
	for _, c := range serviceCharts {
		want[c] = []string{"agentplane-" + c + ".json"}
	}
	for _, c := range allCharts {
		dir := filepath.Join(repoRoot(t), "helm", c, "files", "dashboards")
		got, err := walkFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, want[c]) {
			t.Errorf("helm/%s/files/dashboards holds %v, want %v (run make generate)", c, got, want[c])
		}
		for _, f := range got {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, gen[f]) {
				t.Errorf("helm/%s/files/dashboards/%s differs from deploy/dashboards (run make generate)", c, f)
			}
		}
	}
}

// TestChartsRenderTheirDashboards: every chart renders its dashboards as
// ConfigMaps for Grafana's dashboard sidecar, and dashboards.* change the
// label, the annotations and the namespace or turn them off.
func TestChartsRenderTheirDashboards(t *testing.T) {
	const (
		overview  = "agentplane-overview.json"
		eventPath = "agentplane-event-path.json"
	)
	for _, c := range serviceCharts {
		own := "agentplane-" + c + ".json"
		extra := ""
		t.Run(c+": its own dashboard, labelled grafana_dashboard: \"1\", by default", func(t *testing.T) {
			checkDashboards(t, mustRender(t, c, extra), releaseNS, "grafana_dashboard", "1", own)
		})
		t.Run(c+": dashboards.* set the label, the annotations and the namespace", func(t *testing.T) {
			r := mustRender(t, c, extra+"dashboards: {label: grafana.example.com/dashboard, labelValue: agentplane, namespace: monitoring, annotations: {grafana_folder: agentplane}}")
			checkDashboards(t, r, "monitoring", "grafana.example.com/dashboard", "agentplane", own)
			for _, cm := range dashboardConfigMaps(r, "grafana.example.com/dashboard", "agentplane") {
				if cm.GetAnnotations()["grafana_folder"] != "agentplane" {
					t.Errorf("%s annotations %v", cm.GetName(), cm.GetAnnotations())
				}
				if _, ok := cm.GetLabels()["grafana_dashboard"]; ok {
					t.Errorf("%s still carries the default label", cm.GetName())
				}
			}
		})
		t.Run(c+": dashboards.enabled=false renders none", func(t *testing.T) {
			wantNone(t, mustRender(t, c, extra+"dashboards: {enabled: false}"), "ConfigMap")
		})
		t.Run(c+": the ServiceMonitor keeps the services' namespace label (honorLabels)", func(t *testing.T) {
			sm := mustRender(t, c, extra+"serviceMonitor: {enabled: true}").get(t, "ServiceMonitor", releaseNS, c)
			ep := field(t, sm.Object, "spec", "endpoints").([]any)[0].(map[string]any)
			wantField(t, ep, true, "honorLabels")
		})
	}
	t.Run("agentplane: the dashboards across the services and the agent-controller's by default, once each", func(t *testing.T) {
		r := mustRender(t, umbrella, "")
		checkDashboards(t, r, releaseNS, "grafana_dashboard", "1", overview, eventPath, "agentplane-agent-controller.json")
	})
	t.Run("agentplane: every service's dashboard with every service on, once each", func(t *testing.T) {
		r := mustRender(t, umbrella, "global: {batch: {enabled: true}, realtime: {enabled: true}, omnia: {enabled: true}}")
		var all []string
		for f := range generatedDashboards(t) {
			all = append(all, f)
		}
		checkDashboards(t, r, releaseNS, "grafana_dashboard", "1", all...)
	})
	t.Run("agentplane: without the agent-controller, no agent-controller dashboard", func(t *testing.T) {
		r := mustRender(t, umbrella, "agent-controller: {enabled: false}")
		checkDashboards(t, r, releaseNS, "grafana_dashboard", "1", overview, eventPath)
	})
	t.Run("agentplane: dashboards.* set the label, the annotations and the namespace", func(t *testing.T) {
		r := mustRender(t, umbrella, "dashboards: {label: dash, labelValue: 'yes', namespace: monitoring, annotations: {grafana_folder: agentplane}}")
		checkDashboards(t, r, "monitoring", "dash", "yes", overview, eventPath, "agentplane-agent-controller.json")
		for _, cm := range dashboardConfigMaps(r, "dash", "yes") {
			if cm.GetAnnotations()["grafana_folder"] != "agentplane" {
				t.Errorf("%s annotations %v", cm.GetName(), cm.GetAnnotations())
			}
		}
	})
	t.Run("agentplane: dashboards.enabled=false renders none", func(t *testing.T) {
		wantNone(t, mustRender(t, umbrella, "dashboards: {enabled: false}"), "ConfigMap")
	})
}

// TestDashboardValuesAreChecked: the schema refuses a label or a namespace
// Kubernetes would refuse; the umbrella checks dashboards.* as the service
// charts do.
func TestDashboardValuesAreChecked(t *testing.T) {
	want := readSchema(t, serviceCharts[0])["definitions"].(map[string]any)["dashboards"]
	if got := readSchema(t, umbrella)["definitions"].(map[string]any)["dashboards"]; !reflect.DeepEqual(got, want) {
		t.Error("the umbrella's dashboards schema differs from the service charts'")
	}
	for _, c := range allCharts {
		for _, tc := range []struct{ values, want string }{
			{"dashboards: {label: 'not a label'}", "/dashboards/label"},
			{"dashboards: {labelValue: 1}", "/dashboards/labelValue"},
			{"dashboards: {namespace: Monitoring}", "/dashboards/namespace"},
			{"dashboards: {annotations: {a: 1}}", "/dashboards/annotations/a"},
			{"dashboards: {folder: x}", "'folder'"},
		} {
			t.Run(c+": "+tc.values, func(t *testing.T) {
				_, err := render(t, c, tc.values)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("values %q: got %v, want a refusal naming %s", tc.values, err, tc.want)
				}
			})
		}
	}
}

// firstDifference is the offset of the first byte where a and b differ.
func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// tail is up to 40 bytes of b from i.
func tail(b []byte, i int) []byte {
	return b[i:min(len(b), i+40)]
}
