package bench

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// requestCounts counts API requests by verb and resource, as "POST jobs"
// or "PATCH agents/status".
type requestCounts map[string]float64

// apiRequests reads how many requests the API server has answered so far,
// by verb and resource, from its apiserver_request_total: a phase's
// requests are the difference between two readings.
func apiRequests(t *testing.T, kube kubernetes.Interface) requestCounts {
	t.Helper()
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("scrape the API server: %v", err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("scrape the API server: %v", err)
	}
	out := requestCounts{}
	fam := families["apiserver_request_total"]
	if fam == nil {
		t.Fatal("the API server has no apiserver_request_total")
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += m.GetCounter().GetValue()
	}
	return out
}

// since is what was counted after before was read.
func (r requestCounts) since(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range r {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// perRun lists the requests per run of n runs, the most frequent first,
// leaving out those under one in a hundred runs, and their total.
func (r requestCounts) perRun(n int) string {
	keys := make([]string, 0, len(r))
	var total float64
	for k, v := range r {
		total += v
		if v/float64(n) >= 0.01 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		if r[a] != r[b] {
			if r[a] > r[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%.2f %s", r[k]/float64(n), k)
	}
	return fmt.Sprintf("%.2f: %s", total/float64(n), strings.Join(parts, ", "))
}
