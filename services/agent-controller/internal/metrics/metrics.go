// Package metrics holds the agent controller's Prometheus metrics, named as
// the lifecycle specifies them. Every number is this process's own state: a
// restart starts them from zero, which Prometheus reads as a counter reset.
package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/util/workqueue"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
)

// Metrics is the controller's collectors, registered on their own registry.
type Metrics struct {
	Registry *prometheus.Registry

	Agents           *prometheus.GaugeVec
	RunsCompleted    *prometheus.CounterVec
	RunDuration      *prometheus.HistogramVec
	RunQueue         prometheus.Histogram
	RunFailures      *prometheus.CounterVec
	Resyncs          prometheus.Counter
	WatchReconnects  prometheus.Counter
	BatchCleanupFail prometheus.Counter
	Reconciles       *prometheus.CounterVec
	IsLeader         prometheus.Gauge
	// Undecodable counts, by kind, the stored objects the controller
	// cannot decode and leaves out of its caches.
	Undecodable *prometheus.GaugeVec
	// Workqueue makes a named client-go workqueue's workqueue_* metrics,
	// on Registry; give it to the queue's config.
	Workqueue workqueue.MetricsProvider
}

// WatchedKinds are the kinds the controller caches, the label values of
// controller_undecodable_objects.
var WatchedKinds = []string{"Agent", "Station", "AgentDefinition", "Job"}

// New registers every collector, plus the workqueue metrics and the Go and
// process collectors.
func New() *Metrics {
	wq := newWorkqueueProvider()
	runBuckets := []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Agents: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_agents", Help: "Agents in each phase at the last poll.",
		}, []string{"phase"}),
		RunsCompleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runs_completed_total", Help: "Terminal transitions, by phase and exit code.",
		}, []string{"phase", "exit_code"}),
		RunDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "controller_run_duration_seconds", Help: "From status.startedAt to the terminal patch.", Buckets: runBuckets,
		}, []string{"phase"}),
		RunQueue: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "controller_run_queue_seconds", Help: "From an Agent's creation to its Job: time spent behind a Station's concurrency limit.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 30, 60, 300, 900, 3600},
		}),
		RunFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_run_failures_total", Help: "Runs that ended with a reason, by kind.",
		}, []string{"kind"}),
		Resyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "controller_resyncs_total", Help: "Full (paginated) LISTs of Agents: the poll and watch re-lists.",
		}),
		WatchReconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "controller_watch_reconnects_total", Help: "Times the Agent watch was re-opened after it closed.",
		}),
		BatchCleanupFail: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "controller_batch_cleanup_failures_total", Help: "Failed attempts to delete a batch run's provider-side objects.",
		}),
		Reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_reconciles_total", Help: "Reconciles by result (ok, conflict, error).",
		}, []string{"result"}),
		IsLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "controller_is_leader", Help: "1 while this replica reconciles: it holds the agent-controller Lease, or runs with --leader-elect=false.",
		}),
		Undecodable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_undecodable_objects",
			Help: "Stored objects of a watched kind that cannot be decoded, left out of the caches until fixed or deleted.",
		}, []string{"kind"}),
		Workqueue: wq,
	}
	m.Registry.MustRegister(wq.collectors()...)
	m.Registry.MustRegister(m.Agents, m.RunsCompleted, m.RunDuration, m.RunQueue, m.RunFailures, m.Resyncs,
		m.WatchReconnects, m.BatchCleanupFail, m.Reconciles, m.IsLeader, m.Undecodable,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, p := range []agentsv1alpha1.AgentPhase{agentsv1alpha1.PhasePending, agentsv1alpha1.PhaseRunning, agentsv1alpha1.PhaseSucceeded, agentsv1alpha1.PhaseFailed} {
		m.Agents.WithLabelValues(string(p))
	}
	for _, k := range WatchedKinds {
		m.Undecodable.WithLabelValues(k)
	}
	for _, k := range []decision.FailureKind{decision.FailureMissingRef, decision.FailureJobFailed, decision.FailureOutputUnavailable, decision.FailurePreempted} {
		m.RunFailures.WithLabelValues(string(k))
	}
	return m
}

// Observe records what an applied plan did.
func (m *Metrics) Observe(o decision.Outcome) {
	if o.Started {
		m.RunQueue.Observe(o.QueueWait.Seconds())
	}
	if o.Preempted > 0 {
		m.RunFailures.WithLabelValues(string(decision.FailurePreempted)).Add(float64(o.Preempted))
	}
	if o.Terminal == "" {
		return
	}
	m.RunsCompleted.WithLabelValues(string(o.Terminal), strconv.Itoa(int(o.ExitCode))).Inc()
	if o.Failure != "" {
		m.RunFailures.WithLabelValues(string(o.Failure)).Inc()
	}
	// A run refused at Pending never ran, so it is counted but not timed.
	if o.Failure != decision.FailureMissingRef && o.Failure != decision.FailureInvalidSpec {
		m.RunDuration.WithLabelValues(string(o.Terminal)).Observe(o.Duration.Seconds())
	}
}

// SetPhaseCounts replaces controller_agents with the counts of one poll.
func (m *Metrics) SetPhaseCounts(counts map[agentsv1alpha1.AgentPhase]int) {
	for _, p := range []agentsv1alpha1.AgentPhase{agentsv1alpha1.PhasePending, agentsv1alpha1.PhaseRunning, agentsv1alpha1.PhaseSucceeded, agentsv1alpha1.PhaseFailed} {
		m.Agents.WithLabelValues(string(p)).Set(float64(counts[p]))
	}
}
