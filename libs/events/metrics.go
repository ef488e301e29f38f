package events

import "github.com/prometheus/client_golang/prometheus"

// Metric descriptors of a Publisher. The caller registers the Publisher on
// its own registry (it is a prometheus.Collector); nothing is registered
// globally, so two Publishers in one test do not collide.
var (
	descPublished = prometheus.NewDesc("agentplane_events_published_total",
		"Run events acknowledged by JetStream (duplicates included).", nil, nil)
	descDuplicates = prometheus.NewDesc("agentplane_events_duplicates_total",
		"Run events JetStream acknowledged as already stored.", nil, nil)
	descRetried = prometheus.NewDesc("agentplane_events_publish_retries_total",
		"Publish attempts after a failed attempt.", nil, nil)
	descDropped = prometheus.NewDesc("agentplane_events_dropped_total",
		"Run events given up (buffer full, closed, or refused).", nil, nil)
	descReordered = prometheus.NewDesc("agentplane_events_reordered_total",
		"Run events stored ahead of an earlier event whose publish failed.", nil, nil)
	descBuffered = prometheus.NewDesc("agentplane_events_buffered",
		"Run events waiting to be published.", nil, nil)
)

// Describe implements prometheus.Collector.
func (p *Publisher) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPublished, descDuplicates, descRetried, descDropped, descReordered, descBuffered} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (p *Publisher) Collect(ch chan<- prometheus.Metric) {
	s := p.Stats()
	ch <- prometheus.MustNewConstMetric(descPublished, prometheus.CounterValue, float64(s.Published))
	ch <- prometheus.MustNewConstMetric(descDuplicates, prometheus.CounterValue, float64(s.Duplicates))
	ch <- prometheus.MustNewConstMetric(descRetried, prometheus.CounterValue, float64(s.Retried))
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(s.Dropped))
	ch <- prometheus.MustNewConstMetric(descReordered, prometheus.CounterValue, float64(s.Reordered))
	ch <- prometheus.MustNewConstMetric(descBuffered, prometheus.GaugeValue, float64(s.Buffered))
}
