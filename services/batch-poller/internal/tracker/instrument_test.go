package tracker

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentplane/agentplane/services/batch-poller/internal/metrics"
)

// TestEveryProvidersSeriesStartAtZero: a tracker's providers have every
// op × outcome and every end state at 0 before any call, so the alert on
// the share of failing calls and the dashboards' ratios have series from
// the start.
func TestEveryProvidersSeriesStartAtZero(t *testing.T) {
	m := metrics.New()
	for _, a := range adapters("http://127.0.0.1:1") {
		instrument(a, m)
	}
	const providers = 3
	if got, want := testutil.CollectAndCount(m.VendorCalls), providers*len(callOps)*len(callOutcomes); got != want {
		t.Errorf("%d batch_poller_vendor_calls_total series, want %d", got, want)
	}
	if got, want := testutil.CollectAndCount(m.Finished), providers*len(endStates); got != want {
		t.Errorf("%d batch_poller_batches_finished_total series, want %d", got, want)
	}
	if v := testutil.ToFloat64(m.VendorCalls.WithLabelValues("anthropic", "delete", "error")); v != 0 {
		t.Errorf("anthropic delete error = %v, want 0", v)
	}
}
