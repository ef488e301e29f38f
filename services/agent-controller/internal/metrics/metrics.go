// Package metrics holds the agent controller's Prometheus metrics, named as
// the lifecycle specifies them. Every number is this process's own state: a
// restart starts them from zero, which Prometheus reads as a counter reset.
package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
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
	// BatchCleanupGivenUp counts the batch cleanups given up after the
	// last attempt: each leaves a batch at its provider.
	BatchCleanupGivenUp prometheus.Counter
	Reconciles          *prometheus.CounterVec
	IsLeader            prometheus.Gauge
	// Undecodable counts, by kind, the stored objects the controller
	// cannot decode and leaves out of its caches.
	Undecodable *prometheus.GaugeVec
	// Workqueue makes a named client-go workqueue's workqueue_* metrics,
	// on Registry; give it to the queue's config.
	Workqueue workqueue.MetricsProvider

	// RunsStarted and RunsFinished count runs by where they run and the
	// vendor that carries them: started by mode, finished by phase.
	RunsStarted  *prometheus.CounterVec
	RunsFinished *prometheus.CounterVec
	// StationActive and StationMax are each Station's slots at the last
	// poll: those held, and its limit (0 is none).
	StationActive *prometheus.GaugeVec
	StationMax    *prometheus.GaugeVec
	// RunEvents, RunEventsDropped and RunSinkFailures count what finished
	// run pods said they delivered (their supervisor's summary).
	RunEvents        *prometheus.CounterVec
	RunEventsDropped *prometheus.CounterVec
	RunSinkFailures  prometheus.Counter
	// KubeEventsDropped counts the Kubernetes Events not written because
	// too many waited for the event client's rate limit, by type.
	KubeEventsDropped *prometheus.CounterVec

	// stationsMu guards stations, the Stations the last poll set gauges
	// for, so the next one removes the series of those gone.
	stationsMu sync.Mutex
	stations   map[StationKey]bool
}

// Reconcile results, the label values of controller_reconciles_total.
const (
	ResultOK       = "ok"
	ResultConflict = "conflict"
	ResultError    = "error"
)

// Paths an event can be lost on, the label values of
// controller_run_events_dropped_total.
const (
	PathNATS = "nats"
	PathSink = "sink"
)

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
			Name: "controller_resyncs_total", Help: "LISTs of Agents: each poll (of metadata; whole too when the cache is behind) and watch re-lists.",
		}),
		WatchReconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "controller_watch_reconnects_total", Help: "Times the Agent watch was re-opened after it closed.",
		}),
		BatchCleanupFail: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "controller_batch_cleanup_failures_total", Help: "Failed attempts to delete a batch run's provider-side objects.",
		}),
		BatchCleanupGivenUp: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "controller_batch_cleanups_given_up_total",
			Help: "Batch cleanups given up after the last failed attempt, each leaving a batch at its provider.",
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
		RunsStarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runs_started_total", Help: "Runs started: a Job created (job, realtime) or a batch submitted (batch), by namespace, Station, vendor and mode.",
		}, []string{"namespace", "station", "vendor", "mode"}),
		RunsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runs_finished_total", Help: "Terminal transitions, by namespace, Station, vendor and phase.",
		}, []string{"namespace", "station", "vendor", "phase"}),
		StationActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_station_active_runs", Help: "Runs holding a slot of the Station at the last poll, as its concurrency limit counts them.",
		}, []string{"namespace", "station"}),
		StationMax: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_station_max_concurrent_runs", Help: "The Station's effective concurrency limit at the last poll; 0 is none.",
		}, []string{"namespace", "station"}),
		RunEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_run_events_total", Help: "Events finished run pods emitted, by vendor and kind, as their supervisor reported them.",
		}, []string{"vendor", "kind"}),
		RunEventsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_run_events_dropped_total", Help: "Events finished run pods dropped, by path (nats, sink), as their supervisor reported them.",
		}, []string{"path"}),
		RunSinkFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "controller_run_sink_failures_total", Help: "Deliveries to recipe sinks that failed in finished run pods, as their supervisor reported them.",
		}),
		KubeEventsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_kube_events_dropped_total",
			Help: "Kubernetes Events about Agents not written because 1,000 already waited for --event-qps, by type (Normal, Warning).",
		}, []string{"type"}),
		stations: map[StationKey]bool{},
	}
	m.Registry.MustRegister(wq.collectors()...)
	m.Registry.MustRegister(m.Agents, m.RunsCompleted, m.RunDuration, m.RunQueue, m.RunFailures, m.Resyncs,
		m.WatchReconnects, m.BatchCleanupFail, m.BatchCleanupGivenUp, m.Reconciles, m.IsLeader, m.Undecodable,
		m.RunsStarted, m.RunsFinished, m.StationActive, m.StationMax, m.RunEvents, m.RunEventsDropped, m.RunSinkFailures,
		m.KubeEventsDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Series whose label values are a known few start at 0, so that rate()
	// over them has data from the first scrape rather than from the first
	// time each happens.
	for _, p := range []agentsv1alpha1.AgentPhase{agentsv1alpha1.PhasePending, agentsv1alpha1.PhaseRunning, agentsv1alpha1.PhaseSucceeded, agentsv1alpha1.PhaseFailed} {
		m.Agents.WithLabelValues(string(p))
	}
	for _, k := range WatchedKinds {
		m.Undecodable.WithLabelValues(k)
	}
	for _, k := range decision.FailureKinds {
		m.RunFailures.WithLabelValues(string(k))
	}
	for _, r := range []string{ResultOK, ResultConflict, ResultError} {
		m.Reconciles.WithLabelValues(r)
	}
	for _, p := range []string{PathNATS, PathSink} {
		m.RunEventsDropped.WithLabelValues(p)
	}
	for _, t := range []string{corev1.EventTypeNormal, corev1.EventTypeWarning} {
		m.KubeEventsDropped.WithLabelValues(t)
	}
	return m
}

// Observe records what an applied plan did for run r. The controller calls
// it once the plan's writes succeeded, and a terminal Agent is never
// decided again, so a start and an end are each counted once per run, and
// so is its pod's summary, which comes with its end.
func (m *Metrics) Observe(r decision.Run, o decision.Outcome) {
	if o.Started {
		m.RunQueue.Observe(o.QueueWait.Seconds())
		m.RunsStarted.WithLabelValues(r.Namespace, r.Station, r.Vendor, string(o.Mode)).Inc()
	}
	if o.Preempted > 0 {
		m.RunFailures.WithLabelValues(string(decision.FailurePreempted)).Add(float64(o.Preempted))
	}
	if o.Terminal == "" {
		return
	}
	m.RunsCompleted.WithLabelValues(string(o.Terminal), strconv.Itoa(int(o.ExitCode))).Inc()
	m.RunsFinished.WithLabelValues(r.Namespace, r.Station, r.Vendor, string(o.Terminal)).Inc()
	if s := o.Summary; s != nil {
		for kind, n := range s.Events {
			m.RunEvents.WithLabelValues(r.Vendor, kind).Add(float64(n))
		}
		m.RunEventsDropped.WithLabelValues(PathNATS).Add(float64(s.NATSDropped))
		m.RunEventsDropped.WithLabelValues(PathSink).Add(float64(s.SinkDropped))
		m.RunSinkFailures.Add(float64(s.SinkFailed))
	}
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

// StationKey names a Station.
type StationKey struct{ Namespace, Name string }

// StationLoad is a Station's slots: those held (Active) and its effective
// limit (Max, 0 for none).
type StationLoad struct{ Active, Max int }

// SetStations replaces the Station gauges with the loads of one poll;
// Stations of the previous poll that are gone lose their series.
func (m *Metrics) SetStations(loads map[StationKey]StationLoad) {
	m.stationsMu.Lock()
	defer m.stationsMu.Unlock()
	for k, l := range loads {
		m.StationActive.WithLabelValues(k.Namespace, k.Name).Set(float64(l.Active))
		m.StationMax.WithLabelValues(k.Namespace, k.Name).Set(float64(l.Max))
	}
	for k := range m.stations {
		if _, ok := loads[k]; !ok {
			m.StationActive.DeleteLabelValues(k.Namespace, k.Name)
			m.StationMax.DeleteLabelValues(k.Namespace, k.Name)
			delete(m.stations, k)
		}
	}
	for k := range loads {
		m.stations[k] = true
	}
}
