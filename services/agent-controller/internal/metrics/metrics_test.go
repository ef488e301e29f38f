package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
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

	m.Observe(decision.Outcome{Started: true, QueueWait: time.Second})
	m.Observe(decision.Outcome{Terminal: agentsv1alpha1.PhaseSucceeded, Duration: time.Minute})
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
