package controller

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// The benchmark runs only under `make bench` (AGENTPLANE_BENCH=1): it
// creates thousands of objects and reports figures, never asserting them.
func benchEnabled(t *testing.T) {
	if os.Getenv("AGENTPLANE_BENCH") == "" {
		t.Skip("benchmark: run with `make bench` (AGENTPLANE_BENCH=1)")
	}
}

func benchN() int {
	if n, err := strconv.Atoi(os.Getenv("AGENTPLANE_BENCH_N")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// report records one figure for docs/benchmarks.md.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.BenchReport(t, fmt.Sprintf(format, args...))
}

// startBinary runs the real agent-controller binary against the control
// plane, for one namespace, and returns its PID.
func startBinary(t *testing.T, ns string) int {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "agent-controller")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/agentplane/agentplane/services/agent-controller").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	kc, err := env.KubeconfigFor("bench")
	if err != nil {
		t.Fatal(err)
	}
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig", kcPath, "--watch-namespace", ns, "--leader-elect=false",
		"--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0", "--log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

func rssMiB(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// parallel runs fn(i) for i in [0,n) on w workers and returns the wall time.
func parallel(n, w int, fn func(i int)) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	for k := 0; k < w; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return time.Since(start)
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[int(float64(len(ds)-1)*p)]
}

// TestBenchBurst: N Agents created at once. Beside the controller's
// Agents→Jobs rate it measures, in the same run, a plain client making the
// same writes (create the Job, patch the Agent's status) and
// kube-controller-manager turning N Jobs into pods.
func TestBenchBurst(t *testing.T) {
	benchEnabled(t)
	n := benchN()
	ctx := context.Background()

	// Raw ceiling: the controller's two writes per run, from a plain client.
	raw := env.Namespace(t)
	mkStation(t, raw, "st", nil)
	for i := 0; i < n; i++ {
		mkAgent(t, raw, fmt.Sprintf("r-%d", i), "st")
	}
	st := &agentsv1alpha1.Station{}
	def := &agentsv1alpha1.AgentDefinition{}
	if err := env.Client.Get(ctx, keyOf(raw, "st"), st); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, keyOf(raw, "st-def"), def); err != nil {
		t.Fatal(err)
	}
	podsWatch, err := env.Kube.CoreV1().Pods(raw).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podsDone := make(chan time.Time, 1)
	go func() {
		seen := 0
		for ev := range podsWatch.ResultChan() {
			if ev.Type == watch.Added {
				if seen++; seen == n {
					podsDone <- time.Now()
					return
				}
			}
		}
	}()
	rawStart := time.Now()
	rawTime := parallel(n, 4, func(i int) {
		a := getAgent(t, raw, fmt.Sprintf("r-%d", i))
		job, err := jobbuild.Build(jobbuild.Input{Agent: a, Station: st, Definition: def, Model: "claude-opus-5-5",
			Config: jobbuild.Config{SupervisorImage: "s", SupervisorPath: "/s"}})
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := env.Kube.BatchV1().Jobs(raw).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Error(err)
			return
		}
		patched := a.DeepCopy()
		patched.Status.Phase = agentsv1alpha1.PhaseRunning
		patched.Status.JobName = job.Name
		if err := env.Client.Status().Update(ctx, patched); err != nil {
			t.Error(err)
		}
	})
	var kcm time.Duration
	select {
	case done := <-podsDone:
		kcm = done.Sub(rawStart)
	case <-time.After(5 * time.Minute):
		t.Log("kube-controller-manager did not create every pod within 5 minutes")
	}
	podsWatch.Stop()

	// The controller binary, on a burst of N Agents.
	ns := env.Namespace(t)
	mkStation(t, ns, "st", nil)
	pid := startBinary(t, ns)
	jobs, err := env.Kube.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := make([]time.Time, n)
	jobAt := map[string]time.Time{}
	var mu sync.Mutex
	allJobs := make(chan struct{})
	go func() {
		for ev := range jobs.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok && ev.Type == watch.Added {
				mu.Lock()
				jobAt[j.Name] = time.Now()
				done := len(jobAt) == n
				mu.Unlock()
				if done {
					close(allJobs)
					return
				}
			}
		}
	}()
	time.Sleep(2 * time.Second) // let the controller sync before the burst
	burstStart := time.Now()
	parallel(n, 8, func(i int) {
		created[i] = time.Now()
		mkAgent(t, ns, fmt.Sprintf("a-%d", i), "st")
	})
	select {
	case <-allJobs:
	case <-time.After(10 * time.Minute):
		t.Fatal("the controller did not create every Job within 10 minutes")
	}
	ctlTime := time.Since(burstStart)
	jobs.Stop()
	var lat []time.Duration
	for i := 0; i < n; i++ {
		lat = append(lat, jobAt[fmt.Sprintf("agent-job-a-%d", i)].Sub(created[i]))
	}
	rss := rssMiB(pid)

	rawRate := float64(n) / rawTime.Seconds()
	ctlRate := float64(n) / ctlTime.Seconds()
	report(t, "| burst of %d Agents → Jobs (agent-controller binary, 4 workers) | %.0f runs/s | %.0f%% of the raw ceiling |", n, ctlRate, 100*ctlRate/rawRate)
	report(t, "| created → Job latency | p50 %s, p99 %s | |", pct(lat, 0.5).Round(time.Millisecond), pct(lat, 0.99).Round(time.Millisecond))
	report(t, "| raw ceiling: plain client, same writes (create Job + patch status), 4 workers | %.0f runs/s | 100%% |", rawRate)
	if kcm > 0 {
		report(t, "| kube-controller-manager: %d Jobs → pods | %.0f pods/s | controller is %.1f× the Job controller |", n, float64(n)/kcm.Seconds(), ctlRate/(float64(n)/kcm.Seconds()))
	}
	report(t, "| agent-controller RSS after the burst (%d Agents cached) | %.0f MiB | |", n, rss)
}

// TestBenchCacheMemory: RSS of the controller binary holding 10,000 Agents
// in its cache.
func TestBenchCacheMemory(t *testing.T) {
	benchEnabled(t)
	n := 10 * benchN()
	ns := env.Namespace(t)
	parallel(n, 16, func(i int) {
		// Terminal Agents: cached, reconciled with no I/O.
		a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m-%d", i), Namespace: ns},
			Spec: agentsv1alpha1.AgentSpec{StationRef: "st", TaskID: fmt.Sprintf("TASK-%d", i), Parameters: map[string]string{"issue": strconv.Itoa(i)}}}
		if err := env.Client.Create(context.Background(), a); err != nil {
			t.Error(err)
			return
		}
		a.Status.Phase = agentsv1alpha1.PhaseSucceeded
		a.Status.Output = strings.Repeat("x", 512)
		_ = env.Client.Status().Update(context.Background(), a)
	})
	pid := startBinary(t, ns)
	time.Sleep(20 * time.Second) // sync, one poll, settle
	report(t, "| agent-controller RSS with %d Agents in the cache | %.0f MiB | target ≤ 150 MiB |", n, rssMiB(pid))
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
