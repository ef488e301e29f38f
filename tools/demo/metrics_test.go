package main

import "testing"

// TestSumSeriesAddsTheSamplesOfOneMetric: the demo's figures read back
// from a service's /metrics sum the samples of the series asked for only.
func TestSumSeriesAddsTheSamplesOfOneMetric(t *testing.T) {
	text := `# HELP batch_poller_vendor_calls_total Vendor API operations.
# TYPE batch_poller_vendor_calls_total counter
batch_poller_vendor_calls_total{op="poll",outcome="ok",provider="anthropic"} 3
batch_poller_vendor_calls_total{op="poll",outcome="ok",provider="openai"} 2
batch_poller_vendor_calls_total{op="poll",outcome="error",provider="openai"} 7
batch_poller_vendor_calls_total{op="submit",outcome="ok",provider="anthropic"} 1
`
	cases := []struct {
		rule   string
		prefix string
		want   float64
	}{
		{"every provider's samples of the series add up", `batch_poller_vendor_calls_total{op="poll",outcome="ok"`, 5},
		{"other label values are left out", `batch_poller_vendor_calls_total{op="submit"`, 1},
		{"comments are not samples", `# HELP batch_poller_vendor_calls_total`, 0},
		{"a series that is absent sums to 0", `batch_poller_batches_in_flight`, 0},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if got := sumSeries(text, c.prefix); got != c.want {
				t.Errorf("sumSeries(%q) = %v, want %v", c.prefix, got, c.want)
			}
		})
	}
}
