package helm

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestChartsRenderTheirAlertRules: with prometheusRule.enabled every
// service chart renders one PrometheusRule whose groups are those of
// deploy/prometheus/<service>.rules.yaml, with Prometheus's own template
// text ({{ $labels... }}, {{ $value }}) left as it is; without it, none.
func TestChartsRenderTheirAlertRules(t *testing.T) {
	for _, c := range serviceCharts {
		t.Run(c+": off by default", func(t *testing.T) {
			wantNone(t, mustRender(t, c, ""), "PrometheusRule")
		})
		t.Run(c+": the rules of deploy/prometheus, with prometheusRule.labels", func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "prometheus", c+".rules.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := yaml.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			pr := mustRender(t, c, "prometheusRule: {enabled: true, labels: {release: kube-prometheus-stack}}").get(t, "PrometheusRule", releaseNS, c)
			if pr.GetLabels()["release"] != "kube-prometheus-stack" || pr.GetLabels()["app.kubernetes.io/part-of"] != "agentplane" {
				t.Errorf("labels %v: want the chart's and prometheusRule.labels", pr.GetLabels())
			}
			spec := field(t, pr.Object, "spec").(map[string]any)
			if !reflect.DeepEqual(spec["groups"], want["groups"]) {
				t.Errorf("spec.groups differ from deploy/prometheus/%s.rules.yaml", c)
			}
			out, _ := yaml.Marshal(spec)
			if strings.Contains(string(raw), "{{ $") && !strings.Contains(string(out), "{{ $") {
				t.Error("Helm evaluated the annotations' Prometheus templates")
			}
		})
	}
}
