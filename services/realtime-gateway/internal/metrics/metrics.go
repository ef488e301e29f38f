// Package metrics holds the realtime-gateway's Prometheus metrics, on a
// registry of their own so tests can run several gateways in one process.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc/codes"
)

// Metrics are the gateway's instruments.
type Metrics struct {
	// Registry serves /metrics.
	Registry *prometheus.Registry
	// SessionsActive counts open Prompt streams.
	SessionsActive prometheus.Gauge
	// PromptsTotal counts finished Prompt calls by gRPC status code.
	PromptsTotal *prometheus.CounterVec
	// PromptLatency observes, by stage, the time to the first message of
	// a turn ("first_event") and to its end ("turn").
	PromptLatency *prometheus.HistogramVec
	// UpstreamDial observes connecting to a run pod.
	UpstreamDial prometheus.Histogram
}

// New registers the instruments (and the Go and process collectors) on a
// fresh registry.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		SessionsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "realtime_gateway_sessions_active", Help: "Prompt streams open right now.",
		}),
		PromptsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "realtime_gateway_prompts_total", Help: "Prompt calls finished, by gRPC status code.",
		}, []string{"code"}),
		PromptLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "realtime_gateway_prompt_latency_seconds",
			Help: "Time from a Prompt call to its first streamed message (stage=first_event) and to the turn's end (stage=turn).",
			// Turns of an agent CLI run from milliseconds to many minutes.
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12),
		}, []string{"stage"}),
		UpstreamDial: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "realtime_gateway_upstream_dial_seconds", Help: "Time to connect to a run pod's session server.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
	}
	m.Registry.MustRegister(m.SessionsActive, m.PromptsTotal, m.PromptLatency, m.UpstreamDial,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every code starts at zero: rate() needs a sample before the first
	// increment, or a gateway's first refusal would never show on a graph.
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		m.PromptsTotal.WithLabelValues(c.String())
	}
	return m
}
