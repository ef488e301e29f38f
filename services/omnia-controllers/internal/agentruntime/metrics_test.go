package agentruntime

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/metrics"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/rollout"
)

// agentSeries are the labels of the series of "agent" in ns.
func agentSeries(ns string) prometheus.Labels {
	return prometheus.Labels{"namespace": ns, "agentruntime": "agent"}
}

// finished reads omnia_rollouts_finished_total of a result; the series
// exist from the start, so reading them creates nothing.
func finished(result string) float64 {
	return testutil.ToFloat64(metrics.RolloutsFinished.WithLabelValues(result))
}

// agentMetricsAre is a condition for Eventually on the series of "agent":
// ready, in progress, weight and steps taken, in that order.
func agentMetricsAre(ns string, ready, inProgress, weight, steps float64) func() error {
	s := agentSeries(ns)
	conds := []func() error{
		ctrltest.MetricIs(metrics.AgentRuntimeReady, s, ready),
		ctrltest.MetricIs(metrics.RolloutInProgress, s, inProgress),
		ctrltest.MetricIs(metrics.RolloutCanaryWeight, s, weight),
		ctrltest.MetricIs(metrics.RolloutSteps, s, steps),
	}
	return func() error {
		for _, c := range conds {
			if err := c(); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestMetricsFollowTheAgent: the agent's series follow its stored status:
// not ready until a replica is; a canary rollout is in progress at the
// candidate's weight, with each step counted once however many passes
// hold it; the promotion is counted once and ends the rollout; and the
// deleted agent's series are gone.
func TestMetricsFollowTheAgent(t *testing.T) {
	ns := env.Namespace(t)
	clock := &rolloutClock{}
	startRollout(t, nil, clock)
	promoted := finished(metrics.ResultPromoted)
	rolloutAgent(t, ns, func(a *omniav1.AgentRuntime) {
		a.Spec.Rollout = &omniav1.RolloutConfig{Steps: []omniav1.RolloutStep{
			{SetWeight: ptr(int32(50))},
			{Pause: &omniav1.RolloutPause{Duration: &metav1.Duration{Duration: time.Hour}}},
		}}
	})
	ctrltest.Eventually(t, wait, agentMetricsAre(ns, 0, 0, 0, 0))
	// Plays the kubelet for the pods as they come.
	ctrltest.Eventually(t, wait, func() error {
		if err := roReadyAll(ns); err != nil {
			return err
		}
		return agentMetricsAre(ns, 1, 0, 0, 0)()
	})

	// setWeight 50 is one step; the pause holds on the next.
	roSetCandidate(t, ns, roToV110())
	// The candidate's pods come after the step is taken; until they are
	// all ready a pass may find the agent unready, so the steady state is
	// awaited before it is held.
	ctrltest.Eventually(t, wait, func() error {
		if err := roSettled(ns); err != nil {
			return err
		}
		return agentMetricsAre(ns, 1, 1, 50, 1)()
	})
	roPoke(t, ns)
	ctrltest.Consistently(t, 2*time.Second, agentMetricsAre(ns, 1, 1, 50, 1))

	// The pause ends (a second step) and the candidate is promoted.
	clock.advance(time.Hour)
	roPoke(t, ns)
	ctrltest.Eventually(t, 2*wait, func() error {
		if err := roReadyAll(ns); err != nil {
			return err
		}
		if got := finished(metrics.ResultPromoted) - promoted; got != 1 {
			return fmt.Errorf("promoted rose by %v, want 1", got)
		}
		return agentMetricsAre(ns, 1, 0, 0, 2)()
	})
	roPoke(t, ns)
	ctrltest.Consistently(t, 2*time.Second, func() error {
		if got := finished(metrics.ResultPromoted) - promoted; got != 1 {
			return fmt.Errorf("promoted rose by %v, want 1: one promotion counted once", got)
		}
		return nil
	})

	if err := env.Client.Delete(context.Background(), mustAgent(t, ns, "agent")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []prometheus.Collector{metrics.AgentRuntimeReady, metrics.RolloutInProgress, metrics.RolloutCanaryWeight, metrics.RolloutSteps} {
		ctrltest.Eventually(t, wait, ctrltest.MetricGone(c, agentSeries(ns)))
	}
}

// TestDecideRecordsARollback: the plan says the pass rolled the candidate
// back once the spec write that reverts it is made, which is what
// omnia_rollouts_finished_total{result="rolled_back"} counts.
func TestDecideRecordsARollback(t *testing.T) {
	failing := func(mode omniav1.RollbackMode) snapshot {
		s := readySnapshot(func(a *omniav1.AgentRuntime) {
			a.Spec.Rollout = &omniav1.RolloutConfig{Candidate: roToV110(),
				Steps:    []omniav1.RolloutStep{{Analysis: &omniav1.RolloutAnalysisStep{TemplateName: "errors"}}},
				Rollback: &omniav1.RollbackConfig{Mode: mode}}
		})
		s.analysis = &rollout.AnalysisOutcome{Detail: "0.5 < 0.95"}
		return s
	}
	cases := []struct {
		rule string
		snap snapshot
		want bool
	}{
		{"an automatic rollback whose spec write is made is recorded", failing(omniav1.RollbackAutomatic), true},
		{"a rollback whose spec write fails is not", failed(failing(omniav1.RollbackAutomatic), 0, unavailable), false},
		{"a failed analysis under manual rollback holds and is not", failing(omniav1.RollbackManual), false},
		{"a rollout step is not", readySnapshot(func(a *omniav1.AgentRuntime) {
			a.Spec.Rollout = &omniav1.RolloutConfig{Candidate: roToV110(), Steps: []omniav1.RolloutStep{{SetWeight: ptr(int32(50))}}}
		}), false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			p := decide(tc.snap)
			if len(tc.snap.done) < len(p.writes) {
				// The pass as settled: the writes still to make succeed.
				p = decide(succeeded(tc.snap, p))
			}
			if p.rolledBack != tc.want {
				t.Fatalf("rolledBack = %v, want %v (writes %v)", p.rolledBack, tc.want, writesOf(p))
			}
		})
	}
}

// roSettled plays the kubelet for every pod of "agent" and fails until its
// stable and candidate Deployments have every replica ready, after which
// no pod is left to come and make the agent unready.
func roSettled(ns string) error {
	if err := roReadyAll(ns); err != nil {
		return err
	}
	stable, candidate, err := roDeployments(ns)
	if err != nil {
		return err
	}
	for _, d := range []*appsv1.Deployment{stable, candidate} {
		if d.Status.ObservedGeneration != d.Generation || d.Status.Replicas != roReplicas(d) || d.Status.ReadyReplicas != roReplicas(d) {
			return fmt.Errorf("Deployment %s: %d of %d replicas ready (generation %d, observed %d)",
				d.Name, d.Status.ReadyReplicas, roReplicas(d), d.Generation, d.Status.ObservedGeneration)
		}
	}
	return nil
}
