package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/service"
	"github.com/agentplane/agentplane/libs/service/servicetest"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
)

// exercise gives every family of m at least one series, as a running
// controller would: a named queue through m.Workqueue, a REST call, a
// finished run.
func exercise(t *testing.T, m *Metrics) (host string) {
	t.Helper()
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "agents", MetricsProvider: m.Workqueue})
	defer q.ShutDown()
	q.Add("ns/a")
	q.Add("ns/b")
	k, _ := q.Get()
	q.Done(k)
	// A delay far off counts a retry without the item coming back
	// during the test.
	q.AddAfter("ns/c", time.Hour)

	EnableRESTClientMetrics()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"NamespaceList","apiVersion":"v1","items":[]}`))
	}))
	t.Cleanup(api.Close)
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}

	run := decision.Run{Namespace: "team-a", Station: "fixer", Vendor: "claude"}
	m.Observe(run, decision.Outcome{Started: true, QueueWait: time.Second, Mode: agentsv1alpha1.ExecutionJob})
	m.Observe(run, decision.Outcome{Terminal: agentsv1alpha1.PhaseSucceeded, Duration: time.Minute,
		Summary: &runspec.Summary{Events: map[string]uint64{"message": 2}, SinkFailed: 1}})
	m.SetStations(map[StationKey]StationLoad{{Namespace: "team-a", Name: "fixer"}: {Active: 1, Max: 2}})
	m.Resyncs.Inc()
	m.WatchReconnects.Inc()
	m.BatchCleanupFail.Inc()
	m.Reconciles.WithLabelValues("ok").Inc()
	u, err := url.Parse(api.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func TestWorkqueueAndRESTClientMetrics(t *testing.T) {
	m := New()
	host := exercise(t, m)
	g := m.Gatherer()
	// Each Metrics has its own workqueue series: a second one sees none
	// of the first's adds.
	if n, err := testutil.GatherAndCount(New().Registry, "workqueue_adds_total"); err != nil || n != 0 {
		t.Errorf("a fresh registry has %d workqueue_adds_total series (%v)", n, err)
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string, labels map[string]string) (float64, bool) {
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
		series:
			for _, s := range mf.GetMetric() {
				got := map[string]string{}
				for _, l := range s.GetLabel() {
					got[l.GetName()] = l.GetValue()
				}
				for k, v := range labels {
					if got[k] != v {
						continue series
					}
				}
				switch {
				case s.GetCounter() != nil:
					return s.GetCounter().GetValue(), true
				case s.GetGauge() != nil:
					return s.GetGauge().GetValue(), true
				case s.GetHistogram() != nil:
					return float64(s.GetHistogram().GetSampleCount()), true
				}
			}
		}
		return 0, false
	}
	queue := map[string]string{"name": "agents", "controller": "agents"}
	cases := []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"workqueue_adds_total", queue, 2},
		{"workqueue_depth", map[string]string{"name": "agents", "controller": "agents", "priority": ""}, 1},
		{"workqueue_queue_duration_seconds", queue, 1},
		{"workqueue_work_duration_seconds", queue, 1},
		{"workqueue_retries_total", queue, 1},
		{"rest_client_requests_total", map[string]string{"code": "200", "method": "GET", "host": host}, 1},
		{"rest_client_request_duration_seconds", map[string]string{"verb": "GET", "host": host}, 1},
	}
	for _, c := range cases {
		if got, ok := value(c.metric, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.metric, c.labels, got, ok, c.want)
		}
	}
	for _, name := range []string{"workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"} {
		if _, ok := value(name, queue); !ok {
			t.Errorf("no %s series for the queue", name)
		}
	}
}

func TestMetricsPassPromlint(t *testing.T) {
	m := New()
	if err := service.RegisterBuildInfo(m.Registry, "agent-controller"); err != nil {
		t.Fatal(err)
	}
	exercise(t, m)
	// The controller_* names docs/agent-controller.md fixes as a public
	// contract pass promlint as they are, so nothing is exempt.
	servicetest.Lint(t, m.Gatherer())
}

// TestRunCounting names, rule by rule, what one observed outcome adds to
// the run metrics.
func TestRunCounting(t *testing.T) {
	run := decision.Run{Namespace: "team-a", Station: "fixer", Vendor: "codex"}
	summary := &runspec.Summary{Events: map[string]uint64{"message": 3, "tool_call": 2}, NATSDropped: 1, SinkFailed: 4, SinkDropped: 5}
	type series struct {
		c    prometheus.Collector
		want float64
	}
	cases := []struct {
		rule     string
		outcomes []decision.Outcome
		want     func(m *Metrics) []series
	}{
		{"a start counts once under its mode", []decision.Outcome{{Started: true, Mode: agentsv1alpha1.ExecutionBatch}},
			func(m *Metrics) []series {
				return []series{
					{m.RunsStarted.WithLabelValues("team-a", "fixer", "codex", "batch"), 1},
					{m.RunsStarted.WithLabelValues("team-a", "fixer", "codex", "job"), 0},
				}
			}},
		{"each mode has its own series", []decision.Outcome{
			{Started: true, Mode: agentsv1alpha1.ExecutionJob}, {Started: true, Mode: agentsv1alpha1.ExecutionRealtime}, {Started: true, Mode: agentsv1alpha1.ExecutionJob}},
			func(m *Metrics) []series {
				return []series{
					{m.RunsStarted.WithLabelValues("team-a", "fixer", "codex", "job"), 2},
					{m.RunsStarted.WithLabelValues("team-a", "fixer", "codex", "realtime"), 1},
				}
			}},
		{"an end counts as finished where it counts as completed", []decision.Outcome{{Terminal: agentsv1alpha1.PhaseFailed, ExitCode: 3, Failure: decision.FailureJobFailed}},
			func(m *Metrics) []series {
				return []series{
					{m.RunsFinished.WithLabelValues("team-a", "fixer", "codex", "Failed"), 1},
					{m.RunsCompleted.WithLabelValues("Failed", "3"), 1},
					{m.RunsStarted.WithLabelValues("team-a", "fixer", "codex", "job"), 0},
				}
			}},
		{"a pod's summary is counted with its end", []decision.Outcome{{Terminal: agentsv1alpha1.PhaseSucceeded, Summary: summary}},
			func(m *Metrics) []series {
				return []series{
					{m.RunEvents.WithLabelValues("codex", "message"), 3},
					{m.RunEvents.WithLabelValues("codex", "tool_call"), 2},
					{m.RunEventsDropped.WithLabelValues(PathNATS), 1},
					{m.RunEventsDropped.WithLabelValues(PathSink), 5},
					{m.RunSinkFailures, 4},
				}
			}},
		{"a summary without an end is not counted", []decision.Outcome{{Started: true, Mode: agentsv1alpha1.ExecutionJob, Summary: summary}},
			func(m *Metrics) []series {
				return []series{{m.RunEvents.WithLabelValues("codex", "message"), 0}, {m.RunSinkFailures, 0}}
			}},
		{"an end without a summary counts no events", []decision.Outcome{{Terminal: agentsv1alpha1.PhaseSucceeded}},
			func(m *Metrics) []series {
				return []series{{m.RunEvents.WithLabelValues("codex", "message"), 0}, {m.RunEventsDropped.WithLabelValues(PathNATS), 0}}
			}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			m := New()
			for _, o := range c.outcomes {
				m.Observe(run, o)
			}
			for i, s := range c.want(m) {
				if got := testutil.ToFloat64(s.c); got != s.want {
					t.Errorf("series %d = %v, want %v", i, got, s.want)
				}
			}
		})
	}
}

// TestSeriesOfAKnownFewStartAtZero: rate() over a series needs it to
// exist before its first increment.
func TestSeriesOfAKnownFewStartAtZero(t *testing.T) {
	m := New()
	want := map[string][]string{
		"controller_run_failures_total":       {"missing_ref", "job_failed", "output_unavailable", "preempted", "invalid_spec"},
		"controller_reconciles_total":         {"ok", "conflict", "error"},
		"controller_run_events_dropped_total": {"nats", "sink"},
	}
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range want {
		got := map[string]bool{}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, s := range mf.GetMetric() {
				if s.GetCounter().GetValue() != 0 || len(s.GetLabel()) != 1 {
					t.Errorf("%s: a fresh series %v", name, s)
				}
				got[s.GetLabel()[0].GetValue()] = true
			}
		}
		for _, v := range values {
			if !got[v] {
				t.Errorf("%s{%s} does not exist before its first increment", name, v)
			}
		}
		if len(got) != len(values) {
			t.Errorf("%s has %d series, want %d", name, len(got), len(values))
		}
	}
	if n := testutil.CollectAndCount(m.RunSinkFailures); n != 1 {
		t.Errorf("controller_run_sink_failures_total: %d series", n)
	}
}

func TestStationGauges(t *testing.T) {
	m := New()
	a, b := StationKey{Namespace: "team-a", Name: "fixer"}, StationKey{Namespace: "team-b", Name: "fixer"}
	m.SetStations(map[StationKey]StationLoad{a: {Active: 2, Max: 3}, b: {Active: 1, Max: 0}})
	m.SetStations(map[StationKey]StationLoad{a: {Active: 1, Max: 3}})
	cases := []struct {
		rule string
		got  float64
		want float64
	}{
		{"a Station's active runs are the last poll's", testutil.ToFloat64(m.StationActive.WithLabelValues("team-a", "fixer")), 1},
		{"a Station's limit is the last poll's", testutil.ToFloat64(m.StationMax.WithLabelValues("team-a", "fixer")), 3},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.rule, c.got, c.want)
		}
	}
	// WithLabelValues above made no new series: only a's.
	if n := testutil.CollectAndCount(m.StationActive); n != 1 {
		t.Errorf("a Station gone from the poll keeps its series: %d active-runs series", n)
	}
	if n := testutil.CollectAndCount(m.StationMax); n != 1 {
		t.Errorf("a Station gone from the poll keeps its series: %d limit series", n)
	}
}
