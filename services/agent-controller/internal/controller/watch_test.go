package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// etcdCompact compacts etcd's history up to its current revision through
// etcd's JSON gateway, so any watch resumed from an older resourceVersion
// gets 410 Gone.
func etcdCompact(t *testing.T) {
	t.Helper()
	url := env.EtcdURL()
	post := func(path string, body any, out any) {
		raw, _ := json.Marshal(body)
		resp, err := http.Post(url+path, "application/json", bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: HTTP %d", path, resp.StatusCode)
		}
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
	}
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	post("/v3/kv/range", map[string]any{"key": "Lw=="}, &rng)
	post("/v3/kv/compaction", map[string]any{"revision": rng.Header.Revision, "physical": true}, nil)
}

// TestACompactedWatchCursorCausesOneReList: the watch reconnects after its
// server-side timeout from the last resourceVersion it saw; once etcd is
// compacted past it, the API server answers 410 Gone and the reflector
// re-lists once, then carries on.
func TestACompactedWatchCursorCausesOneReList(t *testing.T) {
	ns := env.Namespace(t)
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	ctl := New(c, env.Kube, m, Options{Namespace: ns, PollInterval: time.Hour, WatchTimeout: time.Second, Log: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ctl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, "the cache to sync", ctl.Synced)
	// The poll ran once at start; the informer listed once.
	eventually(t, "the initial LISTs", func() bool { return counterValue(m.Resyncs) == 2 })

	other := env.Namespace(t)
	for i := 0; i < 3; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bump-%d", i), Namespace: other}}
		if err := env.Client.Create(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
	}
	etcdCompact(t)
	eventually(t, "one re-list after 410 Gone", func() bool { return counterValue(m.Resyncs) == 3 })
	if counterValue(m.WatchReconnects) < 1 {
		t.Error("the watch was never re-opened")
	}
	time.Sleep(3 * time.Second) // a few more watch timeouts: no further re-lists
	if got := counterValue(m.Resyncs); got != 3 {
		t.Errorf("resyncs %v after recovering, want 3: a closed watch resumes, it does not re-list", got)
	}
	mkAgent(t, ns, "after", "nowhere")
	waitPhase(t, ns, "after", agentsv1alpha1.PhaseFailed)
}

// TestMetricsAfterAScriptedScenario runs one success, one failure and one
// missing reference, then reads the counters.
func TestMetricsAfterAScriptedScenario(t *testing.T) {
	ns := env.Namespace(t)
	_, m := start(t, ns)
	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "good", "st")
	mkAgent(t, ns, "bad", "st")
	mkAgent(t, ns, "lost", "missing")
	waitPhase(t, ns, "good", agentsv1alpha1.PhaseRunning)
	waitPhase(t, ns, "bad", agentsv1alpha1.PhaseRunning)
	finishPod(t, ns, "agent-job-good", 0)
	finishPod(t, ns, "agent-job-bad", 2)
	waitPhase(t, ns, "good", agentsv1alpha1.PhaseSucceeded)
	waitPhase(t, ns, "bad", agentsv1alpha1.PhaseFailed)
	waitPhase(t, ns, "lost", agentsv1alpha1.PhaseFailed)
	eventually(t, "the poll to count phases", func() bool {
		return counterValue(m.Agents.WithLabelValues("Succeeded")) == 1 && counterValue(m.Agents.WithLabelValues("Failed")) == 2
	})
	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"runs completed Succeeded/0", counterValue(m.RunsCompleted.WithLabelValues("Succeeded", "0")), 1},
		{"runs completed Failed/2", counterValue(m.RunsCompleted.WithLabelValues("Failed", "2")), 1},
		{"runs completed Failed/1 (missing ref)", counterValue(m.RunsCompleted.WithLabelValues("Failed", "1")), 1},
		{"failures job_failed", counterValue(m.RunFailures.WithLabelValues("job_failed")), 1},
		{"failures missing_ref", counterValue(m.RunFailures.WithLabelValues("missing_ref")), 1},
		{"queue observations (two runs started)", histCount(t, m, "controller_run_queue_seconds"), 2},
		{"duration observations (a missing ref is not timed)", histCount(t, m, "controller_run_duration_seconds"), 2},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func histCount(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, mm := range f.GetMetric() {
			n += float64(mm.GetHistogram().GetSampleCount())
		}
	}
	return n
}
