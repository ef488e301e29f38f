package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metric names the facade exports on its health port's /metrics.
const (
	// connectionsMetric is the gauge of open sessions that the KEDA
	// default trigger sums (services/omnia-controllers
	// internal/agentruntime keda.go ConnectionsMetric, queried as
	// sum(omnia_agent_connections_active{namespace="<ns>",agent="<agent>"})).
	connectionsMetric = "omnia_agent_connections_active"
	// invocationsMetric counts the invocations the facade accepted.
	invocationsMetric = "omnia_agent_invocations_total"
)

// Label names on both metrics. The trigger's query filters on namespace
// and agent, so the facade exports them itself, from OMNIA_NAMESPACE and
// OMNIA_AGENT_NAME. The scrape adds the pod's namespace and pod; a scrape
// with honor_labels keeps the facade's own namespace label, which is the
// pod's anyway (docs/operations.md on honor_labels).
const (
	labelNamespace = "namespace"
	labelAgent     = "agent"
)

// facadeMetrics is the facade's registry: only its own metrics, so a
// scrape of one agent's pods carries nothing of the stand-in's process.
type facadeMetrics struct {
	reg         *prometheus.Registry
	connections prometheus.Gauge
	invocations prometheus.Counter
}

func newFacadeMetrics(agent, namespace string) *facadeMetrics {
	labels := prometheus.Labels{labelNamespace: namespace, labelAgent: agent}
	m := &facadeMetrics{
		reg: prometheus.NewRegistry(),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: connectionsMetric,
			Help: "Sessions open on this facade (invocations included while they run).", ConstLabels: labels}),
		invocations: prometheus.NewCounter(prometheus.CounterOpts{Name: invocationsMetric,
			Help: "Invocations (POST /invoke) this facade accepted.", ConstLabels: labels}),
	}
	m.reg.MustRegister(m.connections, m.invocations)
	return m
}

// handler serves the registry in the Prometheus exposition format.
func (m *facadeMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
