package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv/benchproc"
	"github.com/agentplane/agentplane/services/agent-controller/internal/config"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// ceilingClients is the two-write ceiling's concurrency: all a plain
// client usefully has on this apiserver, well above any controller's
// workers.
const ceilingClients = 32

// TestBenchBurst measures, one after the other on one control plane:
// kube-controller-manager's Job controller turning N Jobs into pods, the
// two-write ceiling (a run's Job and status, the writes the controller
// makes per run), the burst's ceiling (those and the Agent's create),
// agent-controller turning a backlog and then a burst of
// N Agents into Jobs, and agent-controller under steady load at half the
// ceiling.
func TestBenchBurst(t *testing.T) {
	benchEnabled(t)
	n := benchN()
	c, kube := unthrottled(t)

	// The Job controller first: once it stops, the Jobs of the later
	// phases stay without pods, so node-side work never counts.
	kcmRate, kcmLat := jobControllerBurst(t, c, kube, n)
	ceiling, ceilingReqs := twoWriteCeiling(t, c, kube, n)
	ceiling3 := burstCeiling(t, c, kube, n)
	backlog, backlogReqs, backlogCPU := backlogDrain(t, c, kube, n)

	ns := env.Namespace(t)
	mkStation(t, c, ns)
	jobs, err := kube.BatchV1().Jobs(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer jobs.Stop()
	warm, burst := newArrivals(1), newArrivals(n)
	steadyRate := ceiling / 2
	steadyFor := steadyDuration(n)
	steadyN := max(1, int(steadyRate*steadyFor.Seconds()))
	steady := newArrivals(steadyN)
	go func() {
		for ev := range jobs.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok || ev.Type != watch.Added {
				continue
			}
			switch name := strings.TrimPrefix(j.Name, "agent-job-"); {
			case name == "warm":
				warm.seen(name)
			case strings.HasPrefix(name, "b-"):
				burst.seen(name)
			case strings.HasPrefix(name, "s-"):
				steady.seen(name)
			}
		}
	}()
	bin := startBinary(t, ns)
	// One run first, so the burst starts with the caches synced.
	if err := c.Create(context.Background(), newAgent(ns, "warm")); err != nil {
		t.Fatal(err)
	}
	warm.wait(t, time.Minute, "the first Job")

	bin.CPUProfile(t, "start")
	burstStart := time.Now()
	reqsBefore, cpuBefore := benchproc.APIRequests(t, kube), bin.CPU(t)
	created := createAgents(t, c, ns, "b", n, clients)
	burst.wait(t, 10*time.Minute, "Jobs of the burst")
	burstReqs, burstCPU := benchproc.APIRequests(t, kube).Minus(reqsBefore), bin.CPU(t)-cpuBefore
	bin.CPUProfile(t, "stop")
	lat, last := burst.since(created)
	rate := float64(n) / last.Sub(burstStart).Seconds()
	rssBurst := bin.RSSMiB()

	paced, achieved := createPaced(t, c, ns, steadyN, steadyRate)
	steady.wait(t, 10*time.Minute, "Jobs of the steady load")
	steadyLat, _ := steady.since(paced)

	_, cfg := config.NewFlagSet(func(string) string { return "" })
	who := fmt.Sprintf("agent-controller binary, %d workers", cfg.Workers)
	if b := os.Getenv("AGENTPLANE_BENCH_BINARY"); b != "" {
		who = filepath.Base(b) + ", its default workers"
	}
	if extra := os.Getenv("AGENTPLANE_BENCH_ARGS"); extra != "" {
		who += ", " + extra
	}
	report(t, "| Agents → Jobs: burst of %d created by %d clients; %s, QPS %d / burst %d | %.0f runs/s | **%.2f× the two-write ceiling** (target ≥ 0.8); **%.2f× the Job controller** (target ≥ 1.5) |",
		n, clients, who, clientQPS, clientBurst, rate, rate/ceiling, rate/kcmRate)
	report(t, "| the burst against its own ceiling: a plain client making its three writes per run (the Agent's create, its Job, its status), %d goroutines, unthrottled | %.0f runs/s | burst **%.2f×** |",
		ceilingClients, ceiling3, rate/ceiling3)
	report(t, "| created → Job in that burst | p50 %s, p99 %s | |", pct(lat, 0.5), pct(lat, 0.99))
	report(t, "| Agents → Jobs: backlog of %d Agents created before the controller starts (the ceiling's starting point); %s | %.0f runs/s | **%.2f× the two-write ceiling** (target ≥ 0.8) |",
		n, who, backlog, backlog/ceiling)
	report(t, "| two-write ceiling: plain client, the controller's own Job create + status patch (decided by its decision code), %d goroutines, unthrottled | %.0f runs/s | 1 |", ceilingClients, ceiling)
	report(t, "| agent-controller CPU per run in the burst, in the backlog (from its start) | %s, %s | |",
		(burstCPU / time.Duration(n)).Round(10*time.Microsecond), (backlogCPU / time.Duration(n)).Round(10*time.Microsecond))
	report(t, "| API requests per run in the burst (the Agents' creates included) | %s | |", burstReqs.PerRun(n))
	report(t, "| API requests per run in the backlog, from the binary's start | %s | |", backlogReqs.PerRun(n))
	report(t, "| API requests per run of the ceiling | %s | |", ceilingReqs.PerRun(n))
	report(t, "| kube-controller-manager Job controller: %d Jobs created by %d clients → pods (unscheduled), QPS %d / burst %d, default job syncs | %.0f pods/s | created → pod p50 %s, p99 %s |",
		n, clients, clientQPS, clientBurst, kcmRate, pct(kcmLat, 0.5), pct(kcmLat, 0.99))
	report(t, "| steady load: %d Agents at %.0f/s (half the ceiling) for %s | created → Job p50 %s, **p99 %s** | target p99 ≤ 1 s |",
		steadyN, steadyRate, steadyFor, pct(steadyLat, 0.5), pct(steadyLat, 0.99))
	report(t, "| agent-controller RSS after the burst (%d Agents cached), after the steady load | %.0f MiB, %.0f MiB | |", n+1, rssBurst, bin.RSSMiB())
	if achieved < 0.9*steadyRate {
		t.Logf("the steady load reached only %.0f/s of %.0f/s", achieved, steadyRate)
	}
}

// steadyDuration is 60 s for 1,000 Agents or more, less in proportion for
// a smaller AGENTPLANE_BENCH_N, and never under 5 s.
func steadyDuration(n int) time.Duration {
	return max(5*time.Second, min(time.Minute, time.Duration(n)*time.Minute/1000))
}

// createAgents creates prefix-0 … prefix-(n-1) with w clients and returns
// when each create was sent.
func createAgents(t *testing.T, c client.Client, ns, prefix string, n, w int) map[string]time.Time {
	t.Helper()
	at := make([]time.Time, n)
	parallel(n, w, func(i int) {
		at[i] = time.Now()
		if err := c.Create(context.Background(), newAgent(ns, fmt.Sprintf("%s-%d", prefix, i))); err != nil {
			t.Error(err)
		}
	})
	out := make(map[string]time.Time, n)
	for i, ts := range at {
		out[fmt.Sprintf("%s-%d", prefix, i)] = ts
	}
	return out
}

// createPaced creates s-0 … s-(n-1) at rate per second, from a pool of
// clients so a slow create never delays the next, and returns when each
// was sent and the rate reached.
func createPaced(t *testing.T, c client.Client, ns string, n int, rate float64) (map[string]time.Time, float64) {
	t.Helper()
	at := make([]time.Time, n)
	start := time.Now()
	took := parallel(n, clients, func(i int) {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		at[i] = time.Now()
		if err := c.Create(context.Background(), newAgent(ns, fmt.Sprintf("s-%d", i))); err != nil {
			t.Error(err)
		}
	})
	out := make(map[string]time.Time, n)
	for i, ts := range at {
		out[fmt.Sprintf("s-%d", i)] = ts
	}
	return out, float64(n) / took.Seconds()
}

// benchJobConfig is the Job builder's configuration in the baselines.
var benchJobConfig = jobbuild.Config{SupervisorImage: "s", SupervisorPath: "/s"}

// runJob is the Job agent-controller would create for a.
func runJob(t *testing.T, a *agentsv1alpha1.Agent, st *agentsv1alpha1.Station, def *agentsv1alpha1.AgentDefinition) *batchv1.Job {
	t.Helper()
	job, err := jobbuild.Build(jobbuild.Input{Agent: a, Station: st, Definition: def, Model: def.Spec.Model,
		Config: benchJobConfig})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// jobControllerBurst runs kube-controller-manager, creates n run Jobs with
// the burst's clients, and returns the rate at which its Job controller
// created their pods and each Job's created → pod latency.
func jobControllerBurst(t *testing.T, c client.Client, kube kubernetes.Interface, n int) (float64, []time.Duration) {
	t.Helper()
	ctx := context.Background()
	ns := env.Namespace(t)
	st, def := mkStation(t, c, ns)
	jobs := make([]*batchv1.Job, n)
	for i := range jobs {
		a := newAgent(ns, fmt.Sprintf("k-%d", i))
		a.UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
		jobs[i] = runJob(t, a, st, def)
	}
	stop := startKCM(t)
	defer stop()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("kube-controller-manager did not create the default ServiceAccount within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	pods, err := kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pods.Stop()
	got := newArrivals(n)
	go got.added(pods, func(o metav1.Object) string { return o.GetLabels()[batchv1.JobNameLabel] })
	at := make([]time.Time, n)
	start := time.Now()
	parallel(n, clients, func(i int) {
		at[i] = time.Now()
		if _, err := kube.BatchV1().Jobs(ns).Create(ctx, jobs[i], metav1.CreateOptions{}); err != nil {
			t.Error(err)
		}
	})
	got.wait(t, 10*time.Minute, "pods of the Job controller")
	created := make(map[string]time.Time, n)
	for i, j := range jobs {
		created[j.Name] = at[i]
	}
	lat, last := got.since(created)
	return float64(n) / last.Sub(start).Seconds(), lat
}

// twoWriteCeiling returns how many runs per second a plain client starts
// making agent-controller's two writes per run with all the concurrency it
// wants: the Job and the status the controller's own decision code gives
// for each Agent, so the ceiling's writes are byte for byte the
// controller's (its Events aside, which travel on a client held to
// --event-qps, and its namespace's run NetworkPolicy, made once). It also
// returns the API requests of those writes.
func twoWriteCeiling(t *testing.T, c client.Client, kube kubernetes.Interface, n int) (float64, benchproc.Requests) {
	t.Helper()
	ctx := context.Background()
	ns := env.Namespace(t)
	st, def := mkStation(t, c, ns)
	createAgents(t, c, ns, "r", n, clients)
	list := &agentsv1alpha1.AgentList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	before := benchproc.APIRequests(t, kube)
	took := parallel(len(list.Items), ceilingClients, func(i int) {
		startRun(t, c, kube, &list.Items[i], st, def)
	})
	return float64(len(list.Items)) / took.Seconds(), benchproc.APIRequests(t, kube).Minus(before)
}

// burstCeiling returns how many runs per second a plain client starts
// making a burst's three writes per run, with all the concurrency it
// wants: the Agent's create, then the two writes of twoWriteCeiling. It is
// what the burst phase, whose Agents are created as it runs, would reach
// if the controller cost the API server nothing beyond its writes.
func burstCeiling(t *testing.T, c client.Client, kube kubernetes.Interface, n int) float64 {
	t.Helper()
	ns := env.Namespace(t)
	st, def := mkStation(t, c, ns)
	took := parallel(n, ceilingClients, func(i int) {
		a := newAgent(ns, fmt.Sprintf("w-%d", i))
		if err := c.Create(context.Background(), a); err != nil {
			t.Error(err)
			return
		}
		startRun(t, c, kube, a, st, def)
	})
	return float64(n) / took.Seconds()
}

// startRun makes the two writes agent-controller makes to start a's run:
// the Job and the status its decision code gives.
func startRun(t *testing.T, c client.Client, kube kubernetes.Interface, a *agentsv1alpha1.Agent,
	st *agentsv1alpha1.Station, def *agentsv1alpha1.AgentDefinition) {
	t.Helper()
	ctx := context.Background()
	plan := decision.Decide(decision.Snapshot{Now: time.Now(), Agent: a, Station: st, Definition: def,
		Config: decision.Config{Job: benchJobConfig}})
	if plan.CreateJob == nil || plan.Status == nil {
		t.Errorf("Agent %s: the decision starts no Job: %+v", a.Name, plan)
		return
	}
	if _, err := kube.BatchV1().Jobs(a.Namespace).Create(ctx, plan.CreateJob, metav1.CreateOptions{}); err != nil {
		t.Error(err)
		return
	}
	patched := a.DeepCopy()
	patched.Status = *plan.Status
	if err := c.Status().Patch(ctx, patched, client.MergeFromWithOptions(a, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Error(err)
	}
}

// backlogDrain creates n Agents while no controller watches their
// namespace, then starts agent-controller on it and returns the rate at
// which it turned them into Jobs, first Job to last: the ceiling's
// starting point (every Agent exists, none is being created), so the two
// compare the same work, and the API requests and the CPU the binary used
// from its start to its last Job. The process is stopped before the next
// phase.
func backlogDrain(t *testing.T, c client.Client, kube kubernetes.Interface, n int) (float64, benchproc.Requests, time.Duration) {
	t.Helper()
	ns := env.Namespace(t)
	mkStation(t, c, ns)
	createAgents(t, c, ns, "q", n, clients)
	jobs, err := kube.BatchV1().Jobs(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer jobs.Stop()
	got := newArrivals(n)
	go got.added(jobs, metav1.Object.GetName)
	before := benchproc.APIRequests(t, kube)
	bin := startBinary(t, ns)
	defer bin.Stop()
	got.wait(t, 10*time.Minute, "Jobs of the backlog")
	reqs, cpu := benchproc.APIRequests(t, kube).Minus(before), bin.CPU(t)
	first, last := got.span()
	return float64(n-1) / last.Sub(first).Seconds(), reqs, cpu
}
