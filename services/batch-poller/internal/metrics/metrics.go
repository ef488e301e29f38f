// Package metrics holds batch-poller's Prometheus metrics, on a registry
// of its own so tests can build as many as they like.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the service's counters and gauges.
type Metrics struct {
	// Registry holds every metric below plus the Go and process collectors.
	Registry *prometheus.Registry
	// InFlight is the number of tracked batches that have not ended.
	InFlight prometheus.Gauge
	// VendorCalls counts vendor API calls by provider, op (submit, poll,
	// cancel, delete) and outcome (ok, error).
	VendorCalls *prometheus.CounterVec
	// VendorSeconds is the latency of those calls.
	VendorSeconds *prometheus.HistogramVec
	// Finished counts batches seen ending, by provider and state
	// (succeeded, failed).
	Finished *prometheus.CounterVec
	// Notices counts completion notices published on NATS.
	Notices prometheus.Counter
	// SubmitsRecorded counts Submits answered from the durable table by
	// outcome: existing (the run's batch was recorded), in_progress
	// (another call holds the run's submit), unavailable (the table could
	// not be read).
	SubmitsRecorded *prometheus.CounterVec
	// SubmitTakeovers counts submit claims taken over from a process that
	// did not finish them.
	SubmitTakeovers prometheus.Counter
	// PollBackoffs counts polls pushed back after a failed one.
	PollBackoffs prometheus.Counter
}

// New registers the metrics on a fresh registry.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "batch_poller_batches_in_flight", Help: "Tracked batches that have not ended at the vendor.",
		}),
		VendorCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "batch_poller_vendor_calls_total", Help: "Vendor batch API calls by provider, op and outcome.",
		}, []string{"provider", "op", "outcome"}),
		VendorSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "batch_poller_vendor_call_seconds", Help: "Latency of vendor batch API calls.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}, []string{"provider", "op"}),
		Finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "batch_poller_batches_finished_total", Help: "Batches seen ending, by provider and state.",
		}, []string{"provider", "state"}),
		Notices: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "batch_poller_notices_published_total", Help: "Batch completion notices published on NATS.",
		}),
		SubmitsRecorded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "batch_poller_submits_answered_from_state_total",
			Help: "Submits answered from the durable table without a vendor call, by outcome.",
		}, []string{"outcome"}),
		SubmitTakeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "batch_poller_submit_takeovers_total", Help: "Submit claims taken over from a process that did not finish them.",
		}),
		PollBackoffs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "batch_poller_poll_backoffs_total", Help: "Vendor polls pushed back after a failed poll.",
		}),
	}
	for _, o := range []string{"existing", "in_progress", "unavailable"} {
		m.SubmitsRecorded.WithLabelValues(o)
	}
	r.MustRegister(m.InFlight, m.VendorCalls, m.VendorSeconds, m.Finished, m.Notices, m.SubmitsRecorded, m.SubmitTakeovers, m.PollBackoffs,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
