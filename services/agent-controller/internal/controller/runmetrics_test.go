package controller

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// finishPodWith is finishPod with the termination messages the kubelet
// copies from the init and agent containers' termination message files;
// without an init message the pod shows no init container status.
func finishPodWith(t *testing.T, ns, jobName string, code int32, initMsg, agentMsg string) {
	t.Helper()
	pod := podOf(t, ns, jobName)
	phase := corev1.PodSucceeded
	if code != 0 {
		phase = corev1.PodFailed
	}
	now := metav1.Now()
	pod.Status.Phase = phase
	if initMsg != "" {
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: jobbuild.InitContainerName, Image: "supervisor",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: initMsg, StartedAt: now, FinishedAt: now}}}}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: agentsv1alpha1.AgentContainerName, Image: "runner",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: agentMsg, StartedAt: now, FinishedAt: now}}}}
	if _, err := env.Kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func encodeSummary(t *testing.T, s runspec.Summary) string {
	t.Helper()
	raw, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestRunMetricsCountEachRunOnce: two Job runs on one Station, the second
// losing its first patch to Running and its first terminal patch to a
// conflict, as a race with another writer would. Each run is counted
// started once and finished once, the pod summaries of their init and
// agent containers are counted once with the end (a message that is not a
// summary is ignored), and the Station gauges follow the runs, poll after
// poll.
func TestRunMetricsCountEachRunOnce(t *testing.T) {
	ns := env.Namespace(t)
	var lostStart, lostEnd atomic.Int32
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	conflict := apierrors.NewConflict(schema.GroupResource{Group: agentsv1alpha1.GroupVersion.Group, Resource: "agents"}, "b",
		errors.New("the object has been modified"))
	c := interceptor.NewClient(base, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if a, ok := obj.(*agentsv1alpha1.Agent); ok && sub == "status" && a.Name == "b" {
				switch {
				case a.Status.Phase == agentsv1alpha1.PhaseRunning && lostStart.Add(1) == 1:
					return conflict
				case a.Status.Phase.IsTerminal() && lostEnd.Add(1) == 1:
					return conflict
				}
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	m := metrics.New()
	ctl := New(c, env.Kube, m, Options{Namespace: ns, PollInterval: time.Second, Log: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	mkStation(t, ns, "st", func(s *agentsv1alpha1.StationSpec) { s.MaxConcurrentRuns = 3 })
	mkAgent(t, ns, "a", "st")
	mkAgent(t, ns, "b", "st")
	waitPhase(t, ns, "a", agentsv1alpha1.PhaseRunning)
	waitPhase(t, ns, "b", agentsv1alpha1.PhaseRunning)
	eventually(t, "the poll to show two of three slots held", func() bool {
		return counterValue(m.StationActive.WithLabelValues(ns, "st")) == 2 && counterValue(m.StationMax.WithLabelValues(ns, "st")) == 3
	})

	finishPodWith(t, ns, "agent-job-a", 0,
		encodeSummary(t, runspec.Summary{Events: map[string]uint64{"lifecycle": 2}, SinkFailed: 1}),
		encodeSummary(t, runspec.Summary{Events: map[string]uint64{"lifecycle": 2, "message": 3}, NATSDropped: 1, SinkFailed: 1}))
	finishPodWith(t, ns, "agent-job-b", 0, "", "the CLI crashed")
	waitPhase(t, ns, "a", agentsv1alpha1.PhaseSucceeded)
	waitPhase(t, ns, "b", agentsv1alpha1.PhaseSucceeded)
	// Later polls decide both Agents again, and find them terminal.
	polls := counterValue(m.Resyncs)
	eventually(t, "two more polls, freeing the Station's slots", func() bool {
		return counterValue(m.Resyncs) >= polls+2 && counterValue(m.StationActive.WithLabelValues(ns, "st")) == 0
	})
	if lostStart.Load() < 2 || lostEnd.Load() < 2 {
		t.Fatalf("b's patches were tried %d (Running) and %d (terminal) times; the test lost none", lostStart.Load(), lostEnd.Load())
	}
	checks := []struct {
		rule string
		got  float64
		want float64
	}{
		{"each run is counted started once, the one retried included", counterValue(m.RunsStarted.WithLabelValues(ns, "st", "claude", "job")), 2},
		{"each run is counted finished once, the one retried included", counterValue(m.RunsFinished.WithLabelValues(ns, "st", "claude", "Succeeded")), 2},
		{"finished counts where completed does", counterValue(m.RunsCompleted.WithLabelValues("Succeeded", "0")), 2},
		{"the init and agent containers' events add up", counterValue(m.RunEvents.WithLabelValues("claude", "lifecycle")), 4},
		{"each kind is counted under the run's vendor", counterValue(m.RunEvents.WithLabelValues("claude", "message")), 3},
		{"NATS drops are counted", counterValue(m.RunEventsDropped.WithLabelValues(metrics.PathNATS)), 1},
		{"sink drops are counted", counterValue(m.RunEventsDropped.WithLabelValues(metrics.PathSink)), 0},
		{"sink failures add up over the containers", counterValue(m.RunSinkFailures), 2},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.rule, c.got, c.want)
		}
	}
}
