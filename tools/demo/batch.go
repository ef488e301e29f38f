package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/tools/demo/scenario"
)

// showBatch launches the batch run and shows each of its stages as it
// reaches it, then batch-poller's count of vendor polls from its metrics
// (pollerMetrics, the metrics Service's ClusterIP address).
func showBatch(ctx context.Context, c client.Client, pollerMetrics string) error {
	if err := scenario.ApplyBatch(ctx, c, demoNamespace, os.Stdout); err != nil {
		return err
	}
	a, err := showStages(ctx, c, scenario.BatchRun, scenario.BatchStages, 2*time.Minute)
	if err != nil {
		return err
	}
	metrics := "http://" + pollerMetrics + "/metrics"
	polls, errP := metricSum(metrics, `batch_poller_vendor_calls_total{op="poll",outcome="ok"`)
	deletes, errD := metricSum(metrics, `batch_poller_vendor_calls_total{op="delete",outcome="ok"`)
	if errP == nil && errD == nil {
		fmt.Printf("  batch-poller polled the vendor %g times and deleted %g batch at the provider (batch_poller_vendor_calls_total, %s)\n", polls, deletes, metrics)
	}
	if why := scenario.CheckBatch(a); why != "" {
		return fmt.Errorf("the batch run did not end as promised: %s", why)
	}
	fmt.Println("  the batch run ended as its recipe promises")
	return nil
}

// showStages waits for the Agent name of the demo namespace to reach each
// stage in turn, printing each as it is reached, and returns the Agent as
// the last stage saw it.
func showStages(ctx context.Context, c client.Client, name string, stages []scenario.Stage, within time.Duration) (*agentsv1alpha1.Agent, error) {
	a := &agentsv1alpha1.Agent{}
	for _, st := range stages {
		err := newWaiter(300*time.Millisecond).wait(ctx, name+" to be "+st.What, within, func(ctx context.Context) error {
			if err := c.Get(ctx, types.NamespacedName{Namespace: demoNamespace, Name: name}, a); err != nil {
				return err
			}
			if !st.Reached(a) {
				return fmt.Errorf("phase %s", phaseOf(a))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		fmt.Printf("  %-15s ── %s: %s\n", name, st.What, st.Show(a))
	}
	return a, nil
}

// metricSum fetches a Prometheus text exposition from url and sums the
// samples whose series starts with prefix (a metric name and, optionally,
// its first labels).
func metricSum(url, prefix string) (float64, error) {
	resp, err := probeClient.Get(url)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return sumSeries(string(raw), prefix), nil
}

// sumSeries sums the samples of text whose series starts with prefix.
func sumSeries(text, prefix string) float64 {
	sum := 0.0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}
