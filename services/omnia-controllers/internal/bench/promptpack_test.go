package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/benchproc"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// versions is how many versions each pack name has.
const versions = 10

// TestBenchPromptPacks runs the PromptPack workload of docs/benchmarks.md
// (100 pack names × 10 versions, each with its ConfigMap, created at once,
// newest first) against the real binary at its defaults, with the label
// policy the install ships, and reports from outside the process: the time
// until every version is Active or Superseded, the binary's API requests
// and writes per pack (the benchmark's own creates and polls left out),
// its CPU time, its peak resident memory, and its writes and CPU in a 10 s
// window once everything has converged.
func TestBenchPromptPacks(t *testing.T) {
	if os.Getenv(testenv.BenchEnv) == "" {
		t.Skip("benchmark: run with `make bench` (AGENTPLANE_BENCH=1)")
	}
	names := 100
	if n, err := strconv.Atoi(os.Getenv("AGENTPLANE_BENCH_N")); err == nil && n >= versions {
		names = n / versions
	}
	total := names * versions
	ctx := context.Background()
	ns := env.Namespace(t)
	ctrltest.InstallLabelPolicy(t, env, ns)
	bin := startBinary(t)
	startRSS, startFile := bin.RSSMiB(), bin.RSSFileMiB()
	prof := os.Getenv("AGENTPLANE_BENCH_PROFILE")
	bin.HeapProfile(t, prof+".start.heap")
	bin.GoroutineProfile(t, prof+".start.goroutine")
	if m := bin.MemoryClasses(t); m != "" {
		t.Logf("memory classes at start (MiB): %s", m)
	}
	bin.CPUProfile(t, "start")
	stopSampling := bin.SampleMemoryPeak(t, 200*time.Millisecond)

	before, ownBefore, cpuBefore := benchproc.APIRequests(t, env.Kube), bin.requests(t), bin.CPU(t)
	start := time.Now()
	if err := ctrltest.CreatePackVersions(ctx, env.Client, ns, names, versions, 8); err != nil {
		t.Fatal(err)
	}
	created := time.Since(start)
	polls := benchproc.APIRequests(t, env.Kube)["LIST promptpacks"]
	ctrltest.WaitPacksConverged(t, ctx, env.Client, ns, names, versions, 10*time.Minute)
	converged := time.Since(start)
	bin.CPUProfile(t, "stop")
	if rss, m := stopSampling(); m != "" {
		t.Logf("memory classes at the highest RSS sampled, %.1f MiB (MiB): %s", rss, m)
	}
	if m := bin.MemoryClasses(t); m != "" {
		t.Logf("memory classes converged (MiB): %s", m)
	}
	bin.HeapProfile(t, prof+".converged.heap")
	polls = benchproc.APIRequests(t, env.Kube)["LIST promptpacks"] - polls
	// The echoes of the last status writes and the Events that trail them
	// count with the convergence.
	time.Sleep(5 * time.Second)
	after, ownAfter, cpuAfter := benchproc.APIRequests(t, env.Kube), bin.requests(t), bin.CPU(t)
	own := benchproc.Requests{"POST configmaps": float64(total), "POST promptpacks": float64(total), "LIST promptpacks": polls}
	reqs := after.Minus(before).Minus(own)

	const idle = 10 * time.Second
	time.Sleep(idle)
	idleReqs, idleCPU := bin.requests(t).Minus(ownAfter), bin.CPU(t)-cpuAfter
	writes := ownAfter.Minus(ownBefore).Writes() / float64(total)

	testenv.BenchReport(t, fmt.Sprintf("| omnia-controllers binary, PromptPacks | %d names × %d versions created at once (in %.1f s), label stamped at admission, binary defaults | converged in %.1f s; %.2f writes/pack; API requests/pack (the API server's count, less the benchmark's creates and polls) %s; CPU %.2f s (%.1f ms/pack) | |",
		names, versions, created.Seconds(), converged.Seconds(), writes, reqs.PerRun(total),
		(cpuAfter-cpuBefore).Seconds(), float64((cpuAfter-cpuBefore).Milliseconds())/float64(total)))
	testenv.BenchReport(t, fmt.Sprintf("| omnia-controllers binary, memory | RSS at start %.0f MiB (%.0f MiB of it the binary's file), peak %.0f MiB (VmHWM), after %.0f MiB (%.0f MiB file) | | target ≤ 50 MB |",
		startRSS, startFile, bin.PeakRSSMiB(), bin.RSSMiB(), bin.RSSFileMiB()))
	testenv.BenchReport(t, fmt.Sprintf("| omnia-controllers binary, converged and idle | %.0f API writes in %s (its requests by method: %s); CPU %.1f %% of a core | | target 0 writes |",
		idleReqs.Writes(), idle, idleReqs.PerRun(1), 100*idleCPU.Seconds()/idle.Seconds()))
}
