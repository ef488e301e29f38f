package benchproc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// Requests counts API requests by verb and resource, as "POST jobs" or
// "PATCH agents/status".
type Requests map[string]float64

// APIRequests reads how many requests the API server has answered so far,
// by verb and resource, from its apiserver_request_total: a phase's
// requests are the difference between two readings (Minus). It fails tb
// when the API server cannot be read.
func APIRequests(tb testing.TB, kube kubernetes.Interface) Requests {
	tb.Helper()
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatalf("scrape the API server: %v", err)
	}
	r, err := parseRequests(bytes.NewReader(raw))
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// parseRequests sums apiserver_request_total of a metrics page by verb,
// resource and subresource.
func parseRequests(r io.Reader) (Requests, error) {
	return sumCounter(r, "apiserver_request_total", func(labels map[string]string) string {
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		return key
	})
}

// sumCounter sums the counter family of a metrics page by the key each
// series' labels give.
func sumCounter(r io.Reader, family string, key func(labels map[string]string) string) (Requests, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse the metrics: %w", err)
	}
	fam := families[family]
	if fam == nil {
		return nil, fmt.Errorf("no %s in the metrics", family)
	}
	out := Requests{}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		out[key(labels)] += m.GetCounter().GetValue()
	}
	return out, nil
}

// Minus is r less the counts of other: a phase's requests are the
// reading after it minus the reading before, and a controller's are the
// phase's minus the benchmark's own.
func (r Requests) Minus(other Requests) Requests {
	out := Requests{}
	for k, v := range r {
		if d := v - other[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// Writes is how many of the requests change something (POST, PUT, PATCH,
// DELETE, DELETECOLLECTION), keyed "VERB resource" or by the verb alone.
func (r Requests) Writes() float64 {
	var n float64
	for k, v := range r {
		verb, _, _ := strings.Cut(k, " ")
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION":
			n += v
		}
	}
	return n
}

// PerRun lists the requests per unit of work (a run, a pack) of n, the
// most frequent first, leaving out those under one in a hundred units,
// and their total.
func (r Requests) PerRun(n int) string {
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
