package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// TestBenchCacheMemory: RSS of the controller binary holding 10 × N
// Agents in its cache, and the CPU it uses idle: nothing changes for a
// minute, so what it spends is its resyncs and polls.
func TestBenchCacheMemory(t *testing.T) {
	benchEnabled(t)
	n := 10 * benchN()
	ns := env.Namespace(t)
	c, _ := unthrottled(t)
	parallel(n, clients, func(i int) {
		// Terminal Agents: cached, reconciled with no I/O.
		a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m-%d", i), Namespace: ns},
			Spec: agentsv1alpha1.AgentSpec{StationRef: "st", TaskID: fmt.Sprintf("TASK-%d", i), Parameters: map[string]string{"issue": strconv.Itoa(i)}}}
		if err := c.Create(context.Background(), a); err != nil {
			t.Error(err)
			return
		}
		a.Status.Phase = agentsv1alpha1.PhaseSucceeded
		a.Status.Output = strings.Repeat("x", 512)
		_ = c.Status().Update(context.Background(), a)
	})
	bin := startBinary(t, ns)
	time.Sleep(20 * time.Second) // sync, one poll, settle
	report(t, "| agent-controller RSS with %d Agents in the cache | %.0f MiB | target ≤ 150 MiB |", n, bin.RSSMiB())
	const idle = time.Minute
	before := bin.CPU(t)
	bin.CPUProfile(t, "start")
	time.Sleep(idle)
	bin.CPUProfile(t, "stop")
	used := bin.CPU(t) - before
	report(t, "| agent-controller idle CPU with %d Agents in the cache, nothing changing | %.1f %% of one core (%s in %s) | target ≤ 5 %% |",
		n, 100*used.Seconds()/idle.Seconds(), used, idle)
}
