package helm

import (
	"testing"

	"helm.sh/helm/v3/pkg/action"
)

// TestEveryChartLints runs `helm lint --strict` on every chart, with its
// defaults and with every optional part turned on, so a warning fails too.
func TestEveryChartLints(t *testing.T) {
	everything := map[string]string{
		"agent-controller":  "batch: {enabled: true}\nrealtime: {enabled: true}\nserviceMonitor: {enabled: true}\nnetworkPolicy: {enabled: true}\n",
		"batch-poller":      "serviceMonitor: {enabled: true}\nnetworkPolicy: {enabled: true}\n",
		"realtime-gateway":  "tls: {secretName: gateway-tls}\nserviceMonitor: {enabled: true}\nnetworkPolicy: {enabled: true}\n",
		"omnia-controllers": "serviceMonitor: {enabled: true}\nnetworkPolicy: {enabled: true}\n",
		umbrella:            "global: {batch: {enabled: true}, realtime: {enabled: true}, omnia: {enabled: true}}\n",
	}
	for _, name := range allCharts {
		for _, tc := range []struct{ label, values string }{{"defaults", ""}, {"everything on", everything[name]}} {
			t.Run(name+" with "+tc.label, func(t *testing.T) {
				lint := action.NewLint()
				lint.Strict = true
				lint.Namespace = releaseNS
				lint.KubeVersion = kubeVersion
				vals := map[string]any{}
				if tc.values != "" {
					vals = readValues(t, tc.values)
				}
				res := lint.Run([]string{chartDir(t, name)}, vals)
				for _, m := range res.Messages {
					t.Logf("%s", m)
				}
				if res.TotalChartsLinted != 1 || len(res.Errors) > 0 {
					t.Fatalf("lint: %d charts linted, errors: %v", res.TotalChartsLinted, res.Errors)
				}
			})
		}
	}
}
