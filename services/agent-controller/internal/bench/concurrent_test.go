package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/services/agent-controller/internal/config"
)

// TestBenchConcurrentRuns runs 10 × N Agents at once, each a Job whose pod
// "runs" on a simulated node (localnode --simulate-runs) for a random
// 30–120 s (scaled down below N = 100), with kube-controller-manager's
// Job controller creating the pods and marking the Jobs Complete, and the
// real agent-controller binary at its defaults. It reports how soon each
// Agent follows its Job to Succeeded, against the poll period, the
// binary's peak RSS, its reconciles and CPU per run. It fails only when a
// run is lost or does not end Succeeded.
func TestBenchConcurrentRuns(t *testing.T) {
	benchEnabled(t)
	n := 10 * benchN()
	lo, hi := runLengths(benchN())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, kube := unthrottled(t)
	ns := env.Namespace(t)
	mkKeepingStation(t, c, ns, n)
	clearOtherRuns(t, kube, ns)
	// The node lifecycle controller lifts the not-ready taint the API
	// server puts on a new Node.
	startKCM(t, "nodelifecycle")
	waitDefaultServiceAccount(t, kube.CoreV1().ServiceAccounts(ns).Get)
	startSimNode(t, kube, lo, hi, n+100)

	// Both watches run from before the first Agent, so each run's two ends
	// are seen by the same clock.
	jobDone, agentDone := newArrivals(n), newArrivals(n)
	var mu sync.Mutex
	failed := map[string]string{}
	fail := func(name, why string) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := failed[name]; !ok {
			failed[name] = why
		}
	}
	cw := watcher(t)
	var watches sync.WaitGroup
	watches.Add(2)
	go func() {
		defer watches.Done()
		follow(ctx, t, func(rv string) (watch.Interface, error) {
			return kube.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		}, func(ev watch.Event) {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok {
				return
			}
			owner := metav1.GetControllerOf(j)
			if owner == nil {
				return
			}
			for _, cond := range j.Status.Conditions {
				switch {
				case cond.Status != corev1.ConditionTrue:
				case cond.Type == batchv1.JobComplete:
					jobDone.seen(owner.Name)
				case cond.Type == batchv1.JobFailed:
					fail(owner.Name, "Job failed: "+cond.Reason)
				}
			}
		})
	}()
	go func() {
		defer watches.Done()
		follow(ctx, t, func(rv string) (watch.Interface, error) {
			return cw.Watch(ctx, &agentsv1alpha1.AgentList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		}, func(ev watch.Event) {
			a, ok := ev.Object.(*agentsv1alpha1.Agent)
			if !ok {
				return
			}
			switch {
			case ev.Type == watch.Deleted:
				fail(a.Name, "Agent deleted")
			case a.Status.Phase == agentsv1alpha1.PhaseSucceeded:
				agentDone.seen(a.Name)
			case a.Status.Phase == agentsv1alpha1.PhaseFailed:
				fail(a.Name, "Agent Failed: "+a.Status.FailureReason)
			}
		})
	}()
	defer watches.Wait()
	defer cancel()

	metricsAddr := testenv.FreeAddr(t)
	bin := startBinary(t, ns, "--metrics-bind-address", metricsAddr)
	reconcilesBefore := reconciles(t, metricsAddr)
	cpuBefore := bin.CPU(t)
	var rssPeak float64
	sampled := make(chan struct{})
	prof := os.Getenv("AGENTPLANE_BENCH_PROFILE")
	go func() { // VmHWM says the same; the samples are a cross-check
		defer close(sampled)
		began := time.Now()
		var heapPeak float64
		for i := 0; ctx.Err() == nil; i++ {
			rssPeak = max(rssPeak, bin.RSSMiB())
			if i%30 == 0 {
				// When the memory peaks, and whether it is live heap,
				// collector headroom or goroutines.
				heap, _ := metricSum(metricsAddr, "go_memstats_heap_inuse_bytes")
				goroutines, _ := metricSum(metricsAddr, "go_goroutines")
				t.Logf("%s: RSS %.0f MiB, heap in use %.0f MiB, %.0f goroutines, %d Agents Succeeded",
					time.Since(began).Round(time.Second), bin.RSSMiB(), heap/(1<<20), goroutines, agentDone.count())
				// The live heap where the heap in use peaks, which is
				// not where the runs are half done: each sample higher
				// than any before replaces the profile.
				if prof != "" && heap > heapPeak {
					heapPeak = heap
					bin.HeapProfile(t, prof+".peak.heap")
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()

	if prof != "" {
		// The heap when half the runs are done: every run cached, the
		// finished ones read back.
		watches.Add(1)
		go func() {
			defer watches.Done()
			for ctx.Err() == nil && agentDone.count() < n/2 {
				time.Sleep(200 * time.Millisecond)
			}
			if ctx.Err() == nil {
				bin.HeapProfile(t, prof+".heap")
			}
		}()
	}
	start := time.Now()
	createAgents(t, c, ns, "run", n, clients)
	created := time.Since(start)
	// A lost run shows as one that never ends, not as a slow one: the
	// wait ends in failure only once neither a Job nor an Agent has
	// finished for stall, however long the Job controller takes over
	// 10,000 Jobs on a small machine.
	const stall = 3 * time.Minute
	last, lastAt := -1, time.Now()
	for done := false; !done; {
		select {
		case <-agentDone.all:
			done = true
		case <-time.After(5 * time.Second):
			if progress := agentDone.count() + jobDone.count(); progress != last {
				last, lastAt = progress, time.Now()
			} else if time.Since(lastAt) > stall {
				t.Fatalf("nothing finished for %s: %d of %d Agents Succeeded, %d Jobs Complete; pods by phase %v", stall,
					agentDone.count(), n, jobDone.count(), podPhases(t, kube, ns))
			}
		}
	}
	took := time.Since(start)
	cpu := bin.CPU(t) - cpuBefore
	perRun := (reconciles(t, metricsAddr) - reconcilesBefore) / float64(n)
	peak := bin.PeakRSSMiB()
	cancel()
	<-sampled

	// Correctness: every run is there and Succeeded, and its Job Complete.
	list := &agentsv1alpha1.AgentList{}
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	succeeded := 0
	for _, a := range list.Items {
		if a.Status.Phase == agentsv1alpha1.PhaseSucceeded {
			succeeded++
		} else {
			fail(a.Name, fmt.Sprintf("Agent %s in the end", a.Status.Phase))
		}
	}
	if len(list.Items) != n || succeeded != n || len(failed) > 0 {
		shown := 0
		for name, why := range failed {
			if shown++; shown <= 10 {
				t.Errorf("%s: %s", name, why)
			}
		}
		t.Fatalf("%d Agents, %d Succeeded, of %d created; %d went wrong", len(list.Items), succeeded, n, len(failed))
	}

	// The Job's completion as the watch saw it → the Agent's Succeeded.
	jobDone.wait(t, time.Minute, "Jobs Complete seen")
	follows, _ := agentDone.since(jobDone.times())
	_, cfg := config.NewFlagSet(func(string) string { return "" })
	poll := cfg.PollInterval
	p50, p99, pmax := pct(follows, 0.5), pct(follows, 0.99), pct(follows, 1)
	report(t, "| %d concurrent runs on a simulated node (runs last %s–%s), Job controller in the loop, agent-controller binary at its defaults (poll %s) | %d Succeeded in %s (created in %s) | |",
		n, lo, hi, poll, n, took.Round(time.Second), created.Round(time.Second))
	report(t, "| Job Complete → Agent Succeeded, both seen through watches | p50 %s, p99 %s, max %s | **p99 %.2f×, max %.2f× the poll period** (target ≤ 2) |",
		p50, p99, pmax, p99.Seconds()/poll.Seconds(), pmax.Seconds()/poll.Seconds())
	report(t, "| agent-controller peak RSS with %d runs in flight, %s (VmHWM; 1 s samples of VmRSS peak at %.0f MiB) | %.0f MiB | target ≤ 150 MiB |", n, bin.memory, rssPeak, peak)
	report(t, "| agent-controller reconciles per run (controller_reconciles_total, every result) | %.2f | target ≤ 3 |", perRun)
	// Most of the CPU over a long run is the periodic poll, so the CPU
	// per run follows how long the Job controller and the simulated node
	// took: the CPU per minute compares runs of different lengths.
	report(t, "| agent-controller CPU per completed run; per minute of the run | %.1f ms (%s for %d runs in %s); %.1f s | |",
		1000*cpu.Seconds()/float64(n), cpu, n, took.Round(time.Second), cpu.Seconds()/took.Minutes())
}

// runLengths is 30–120 s for N ≥ 100 (1,000 runs and more), less in
// proportion below: 3–12 s for N = 10.
func runLengths(n int) (lo, hi time.Duration) {
	scale := min(1, float64(n)/100)
	return time.Duration(scale * float64(30*time.Second)), time.Duration(scale * float64(120*time.Second))
}

// mkKeepingStation creates an unlimited Station and its AgentDefinition
// that keep all of n finished runs, so every Agent can be read back at
// the end.
func mkKeepingStation(t *testing.T, c client.Client, ns string, n int) {
	t.Helper()
	def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "st-def", Namespace: ns},
		Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "do {thing}"}}
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: "st", Namespace: ns},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: "st-def", DeadlineMinutes: 30,
			SuccessfulRunsHistoryLimit: ptr.To(int32(n)), FailedRunsHistoryLimit: ptr.To(int32(n)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "runner"}}}}}}
	for _, o := range []client.Object{def, st} {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// clearOtherRuns deletes the Jobs and pods the package's earlier tests
// left in their namespaces: the Job controller watches every namespace,
// and the simulated node would run what it made of them beside the runs
// measured here.
func clearOtherRuns(t *testing.T, kube kubernetes.Interface, keep string) {
	t.Helper()
	ctx := context.Background()
	nss, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss.Items {
		if ns.Name == keep {
			continue
		}
		if err := kube.BatchV1().Jobs(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, metav1.ListOptions{}); err != nil {
			t.Fatalf("delete the Jobs of %s: %v", ns.Name, err)
		}
		if err := kube.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
			t.Fatalf("delete the pods of %s: %v", ns.Name, err)
		}
	}
}

// podPhases counts the namespace's pods by phase, bound or not.
func podPhases(t *testing.T, kube kubernetes.Interface, ns string) map[string]int {
	t.Helper()
	pods, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("list pods: %v", err)
		return nil
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		k := string(p.Status.Phase)
		if p.Spec.NodeName == "" {
			k += " (unbound)"
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					k += ": " + c.Message
				}
			}
		}
		out[k]++
	}
	return out
}

// watcher is a client that can watch Agents, unthrottled.
func watcher(t *testing.T) client.WithWatch {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cw, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cw
}

// waitDefaultServiceAccount waits for the ServiceAccount controller:
// pods are refused in a namespace without its default ServiceAccount.
func waitDefaultServiceAccount(t *testing.T, get func(context.Context, string, metav1.GetOptions) (*corev1.ServiceAccount, error)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := get(context.Background(), "default", metav1.GetOptions{}); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("kube-controller-manager did not create the default ServiceAccount within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
