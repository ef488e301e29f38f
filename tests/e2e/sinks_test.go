package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/tests/internal/receiver"
	"github.com/agentplane/agentplane/tests/internal/runs"
)

// TestAnHTTPSinkReceivesEveryEventOfAJobRun: a receiver that knows only
// the documented payload gets, for a Job run, each of the CLI's lines and
// each of the run's own events once, in order, each naming the Agent, its
// Station and the pod that produced it.
func TestAnHTTPSinkReceivesEveryEventOfAJobRun(t *testing.T) {
	ns := env.Namespace(t)
	rcv := receiver.New(t)
	recipeWith(t, ns, "hooked", "claude-opus-5-5", "Fix issue 7", 5, func(s *agentsv1alpha1.AgentDefinitionSpec) {
		s.Output = &agentsv1alpha1.OutputSpec{Sinks: []agentsv1alpha1.OutputSink{{Type: agentsv1alpha1.SinkHTTP, URL: rcv.URL}}}
	})
	launch(t, ns, "fix-7", "hooked", nil)
	a := waitTerminal(t, ns, "fix-7", 2*time.Minute)
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
		t.Fatalf("status %+v", a.Status)
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"job-name": a.Status.JobName}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("the run's pod: %v (%d pods)", err, len(pods.Items))
	}
	pod := pods.Items[0].Name

	// What the receiver must get: one payload per CLI line (the line's
	// first event carries it) and per lifecycle or file event, as stored
	// in the platform stream.
	want := receiver.Expected(runs.Stored(t, natsURL, ns, "fix-7", natsOpts...))
	// The supervisor flushes its sinks before it exits, so the Agent being
	// terminal means every POST was answered.
	got := rcv.Payloads()
	var ids, lcs []string
	for _, p := range got {
		ids = append(ids, p.ID)
		if lc, ok := p.Lifecycle(); ok {
			lcs = append(lcs, lc)
		}
		if p.Source.Agent != "fix-7" || p.Source.Namespace != ns || p.Source.Station != "hooked" || p.Source.Pod != pod {
			t.Errorf("payload %s has source %+v, want agent fix-7 in %s on station hooked from pod %s", p.ID, p.Source, ns, pod)
		}
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("the receiver got %d payloads %v,\nwant %d %v", len(ids), ids, len(want), want)
	}
	if len(lcs) < 3 || lcs[0] != "init/started" || !slices.Contains(lcs, "agent/started") || lcs[len(lcs)-1] != "agent/succeeded" {
		t.Errorf("lifecycle payloads %v: want init/started first, agent/started, and agent/succeeded last", lcs)
	}
}
