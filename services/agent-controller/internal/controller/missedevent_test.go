package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// TestThePollRecoversWhatAStalledWatchMisses: a watch can hang open with
// nothing arriving (a stuck connection, a proxy that buffers); the periodic
// poll still brings every Agent to its right phase. The stalled watch here
// never delivers an event at all, so each step that depends on the stalled
// kind is the poll's doing.
func TestThePollRecoversWhatAStalledWatchMisses(t *testing.T) {
	cases := []struct {
		rule string
		// stalled is the list kind whose watch never delivers.
		stalled string
	}{
		// The Agent is created after the first LIST: only the poll shows
		// it to the controller, which must then start and finish it.
		{"an Agent whose creation the watch never delivers is run by the poll", "AgentList"},
		// The Job is created after the first LIST and finishes unseen:
		// only the poll's pass over the Running Agent finds it finished.
		{"a Job whose completion the watch never delivers still ends its run through the poll", "JobList"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			ns := env.Namespace(t)
			base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			var stalls atomic.Int32
			cl := interceptor.NewClient(base, interceptor.Funcs{
				Watch: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
					if list.GetObjectKind().GroupVersionKind().Kind == c.stalled {
						stalls.Add(1)
						return watch.NewFake(), nil // open, and silent until stopped
					}
					return cl.Watch(ctx, list, opts...)
				},
			})
			ctl := New(cl, env.Kube, metrics.New(), Options{Namespace: ns, PollInterval: time.Second, Log: quiet})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = ctl.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			eventually(t, "the cache to sync", ctl.Synced)

			mkStation(t, ns, "st", nil)
			mkAgent(t, ns, "a", "st")
			waitPhase(t, ns, "a", agentsv1alpha1.PhaseRunning)
			finishPod(t, ns, "agent-job-a", 0)
			a := waitPhase(t, ns, "a", agentsv1alpha1.PhaseSucceeded)
			if a.Status.ExitCode == nil || *a.Status.ExitCode != 0 {
				t.Errorf("exit code %v, want 0", a.Status.ExitCode)
			}
			if stalls.Load() == 0 {
				t.Errorf("no %s watch was stalled: the test saw nothing of the poll", c.stalled)
			}
		})
	}
}
