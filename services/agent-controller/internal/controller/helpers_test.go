package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/services/agent-controller/internal/leader"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

func counterValue(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// runReplica runs one controller replica under leader election, with short
// timings so takeover happens within the test.
func runReplica(ctx context.Context, t *testing.T, ns, id string, leads *sync.Map) {
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Error(err)
		return
	}
	m := metrics.New()
	_ = leader.Run(ctx, leader.Config{
		Client: env.Kube, Namespace: ns, Name: "agent-controller", Identity: id,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
		Log: quiet, State: &leader.State{}, Metrics: m,
		OnLeading: func(ctx context.Context) {
			leads.Store(id, true)
			_ = New(c, env.Kube, m, Options{Namespace: ns, PollInterval: 2 * time.Second, Log: quiet}).Run(ctx)
		},
	})
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
