package promptpack

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
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
			installLabelPolicy(b, ns)
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
		var wg sync.WaitGroup
		work := make(chan [2]int)
		errs := make(chan error, 1)
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for nv := range work {
					if err := createVersion(ctx, ns, nv[0], nv[1]); err != nil {
						select {
						case errs <- err:
						default:
						}
					}
				}
			}()
		}
		// Newest versions first, so convergence has to supersede.
		for ver := versions; ver >= 1; ver-- {
			for n := 0; n < names; n++ {
				work <- [2]int{n, ver}
			}
		}
		close(work)
		wg.Wait()
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
		created := time.Since(start)
		for {
			var packs omniav1.PromptPackList
			if err := env.Client.List(ctx, &packs, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
			done := 0
			for _, p := range packs.Items {
				want := omniav1.PromptPackPhaseSuperseded
				if p.Spec.Version == fmt.Sprintf("%d.0.0", versions) {
					want = omniav1.PromptPackPhaseActive
				}
				if p.Status.Phase == want {
					done++
				}
			}
			if done == names*versions {
				break
			}
			if time.Since(start) > 10*time.Minute {
				b.Fatalf("only %d of %d converged", done, names*versions)
			}
			time.Sleep(200 * time.Millisecond)
		}
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

func createVersion(ctx context.Context, ns string, n, ver int) error {
	name := fmt.Sprintf("pack-%03d-v%02d", n, ver)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{omniav1.PackJSONKey: validPack}}
	if err := env.Client.Create(ctx, cm); err != nil {
		return err
	}
	p := &omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: omniav1.PromptPackSpec{
		PackName: fmt.Sprintf("pack-%03d", n), Version: fmt.Sprintf("%d.0.0", ver),
		Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: name}}}}
	return env.Client.Create(ctx, p)
}
