package servicetest

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// Lint runs promlint over what g gathers and fails t on every problem,
// except those of the metric names in exempt: names a service's docs fix
// as a public contract, which renaming would break for their users. An
// exempt name that draws no problem fails t as well, so an exemption
// cannot outlive its reason. Only families with at least one series are
// gathered, so exercise the metrics of interest first.
func Lint(t testing.TB, g prometheus.Gatherer, exempt ...string) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
		return
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
		return
	}
	used := map[string]bool{}
	for _, p := range problems {
		if slices.Contains(exempt, p.Metric) {
			used[p.Metric] = true
			continue
		}
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, name := range exempt {
		if !used[name] {
			t.Errorf("promlint: %s is exempt but has no problem (or no series): drop the exemption", name)
		}
	}
}
