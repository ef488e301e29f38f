package metrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/util/workqueue"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The workqueue_* and rest_client_* metrics have the names, labels and
// buckets omnia-controllers exports through controller-runtime (listed in
// docs/agent-controller.md), so one dashboard serves both controllers.

// workqueueProvider makes the metrics of a client-go workqueue. It is
// given to the controller's queue itself rather than installed with
// workqueue.SetProvider: that hook is process-wide and once-only, while
// each Metrics (one per run of the binary in tests) has its own registry.
// The controller label repeats the queue's name, and depth's priority is
// empty, as controller-runtime labels a queue without priorities.
type workqueueProvider struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

func newWorkqueueProvider() *workqueueProvider {
	// As controller-runtime's: 10ns to about 3 hours, with native
	// histograms for scrapers that take them.
	hist := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: name, Help: help,
			Buckets:                     prometheus.ExponentialBuckets(10e-9, 10, 12),
			NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 100, NativeHistogramMinResetDuration: time.Hour,
		}, []string{"name", "controller"})
	}
	return &workqueueProvider{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "depth", Help: "Items waiting in the work queue now.",
		}, []string{"name", "controller", "priority"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "adds_total", Help: "Items added to the work queue.",
		}, []string{"name", "controller"}),
		latency:      hist("queue_duration_seconds", "Seconds an item waited in the work queue before a worker took it."),
		workDuration: hist("work_duration_seconds", "Seconds a worker spent on one item."),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "Seconds of work in progress not yet counted in work_duration; " +
				"a steady rise means a worker is stuck.",
		}, []string{"name", "controller"}),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "Seconds the longest-running worker has spent on its current item.",
		}, []string{"name", "controller"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "retries_total",
			Help: "Items re-added to the work queue after a delay (backoff requeues and later passes).",
		}, []string{"name", "controller"}),
	}
}

func (p *workqueueProvider) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.depth, p.adds, p.latency, p.workDuration, p.unfinished, p.longest, p.retries}
}

// NewDepthMetric is workqueue_depth for the queue name.
func (p *workqueueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.depth.WithLabelValues(name, name, "")
}

// NewAddsMetric is workqueue_adds_total for the queue name.
func (p *workqueueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.adds.WithLabelValues(name, name)
}

// NewLatencyMetric is workqueue_queue_duration_seconds for the queue name.
func (p *workqueueProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.latency.WithLabelValues(name, name)
}

// NewWorkDurationMetric is workqueue_work_duration_seconds for the queue name.
func (p *workqueueProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.workDuration.WithLabelValues(name, name)
}

// NewUnfinishedWorkSecondsMetric is workqueue_unfinished_work_seconds for the queue name.
func (p *workqueueProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.unfinished.WithLabelValues(name, name)
}

// NewLongestRunningProcessorSecondsMetric is workqueue_longest_running_processor_seconds
// for the queue name.
func (p *workqueueProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.longest.WithLabelValues(name, name)
}

// NewRetriesMetric is workqueue_retries_total for the queue name.
func (p *workqueueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.retries.WithLabelValues(name, name)
}

// EnableRESTClientMetrics turns on rest_client_request_duration_seconds
// next to rest_client_requests_total. client-go's metrics.Register is
// process-wide and once-only, and controller-runtime's metrics package,
// which its client links into this binary, has already called it from an
// init function with adapters writing to its own registry; a second
// Register would be silently ignored. So the REST client metrics are
// controller-runtime's, enabled here and served through Gatherer. Call it
// once, from main; later calls change nothing.
func EnableRESTClientMetrics() {
	ctrlmetrics.RegisterRESTClientMetrics(ctrlmetrics.MetricRequestLatency)
}

// restClientGatherer gathers only the rest_client_* families of
// controller-runtime's registry: the rest of it (its leader-election
// gauge) describes machinery this controller does not use.
var restClientGatherer = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
	mfs, err := ctrlmetrics.Registry.Gather()
	kept := mfs[:0]
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "rest_client_") {
			kept = append(kept, mf)
		}
	}
	return kept, err
})

// Gatherer is what /metrics serves: the registry plus client-go's REST
// client metrics.
func (m *Metrics) Gatherer() prometheus.Gatherer {
	return prometheus.Gatherers{m.Registry, restClientGatherer}
}
