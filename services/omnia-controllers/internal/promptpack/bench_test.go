package promptpack

import (
	"context"
	"fmt"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// BenchmarkConverge100x10 is the PromptPack workload of
// docs/benchmarks.md: 100 pack names × 10 versions (and their ConfigMaps)
// created at once. It reports the time until every version is Active or
// Superseded, the reconciles and the controller's writes per object until
// then, the reconciles still queued at that moment (tail), and the
// reconciles during a 5 s window once the queue is quiet (0 unless a pass
// rewrites an unchanged status). It runs twice: with the shipped label
// policy (the API server stamps the pack-name label) and without it (the
// controller does).
//
//	go test -run '^$' -bench Converge100x10 -benchtime 1x ./internal/promptpack/
func BenchmarkConverge100x10(b *testing.B) {
	for _, policy := range []bool{true, false} {
		name := "label-policy"
		if !policy {
			name = "controller-labels"
		}
		b.Run(name, func(b *testing.B) { benchConverge(b, policy) })
	}
}

func benchConverge(b *testing.B, policy bool) {
	const names, versions = 100, 10
	for i := 0; i < b.N; i++ {
		ns := env.Namespace(b)
		if policy {
			ctrltest.InstallLabelPolicy(b, env, ns)
		}
		v, err := NewSchemaValidator()
		if err != nil {
			b.Fatal(err)
		}
		counter := &ctrltest.Counter{}
		wc := &writeCounter{ns: ns, n: map[string]int{}}
		ctrltest.StartManager(b, env, func(mgr ctrl.Manager) error {
			r := &Reconciler{Client: ctrltest.Intercept(mgr.GetClient(), wc.funcs()), Recorder: mgr.GetEventRecorder("promptpack-controller"), Validator: v}
			counter.Inner = r
			return r.SetupWithManager(mgr, counter)
		})
		ctx := context.Background()
		start := time.Now()
		if err := ctrltest.CreatePackVersions(ctx, env.Client, ns, names, versions, 8); err != nil {
			b.Fatal(err)
		}
		created := time.Since(start)
		ctrltest.WaitPacksConverged(b, ctx, env.Client, ns, names, versions, 10*time.Minute)
		converged := time.Since(start)
		total := counter.Total()
		// Let the queue drain the echoes of the last status writes (no pass
		// for a full second), then measure an idle window.
		counter.Drain(time.Second)
		tail := counter.Total() - total
		quiet := counter.Total()
		time.Sleep(5 * time.Second)
		idle := counter.Total() - quiet
		writes := 0
		for _, n := range wc.counts() {
			writes += n
		}
		perPack := float64(writes) / float64(names*versions)
		b.ReportMetric(created.Seconds(), "s-create")
		b.ReportMetric(converged.Seconds(), "s-converge")
		b.ReportMetric(float64(total)/float64(names*versions), "reconciles/pack")
		b.ReportMetric(perPack, "writes/pack")
		b.ReportMetric(float64(tail), "tail-reconciles")
		b.ReportMetric(float64(idle), "idle-reconciles/5s")
		how := "the label stamped by the controller"
		if policy {
			how = "the label stamped at admission"
		}
		testenv.BenchReport(b, fmt.Sprintf("| omnia-controllers PromptPack | %d names × %d versions created at once, %s | create %.1f s, converged %.1f s, %.2f reconciles/pack, %.2f writes/pack %v, %d queued after, %d in a 5 s idle window |",
			names, versions, how, created.Seconds(), converged.Seconds(), float64(total)/float64(names*versions), perPack, wc.counts(), tail, idle))
	}
}
