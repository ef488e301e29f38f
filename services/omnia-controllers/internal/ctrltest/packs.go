package ctrltest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
)

// ValidPack is a pack document the published schema accepts: one prompt,
// the template engine and nothing else.
const ValidPack = `{"id":"support","name":"Support","version":"1.0.0",
 "template_engine":{"version":"v1","syntax":"{{variable}}"},
 "prompts":{"default":{"id":"default","name":"Default","version":"1.0.0","system_template":"You help."}}}`

// LabelPolicyFile is the MutatingAdmissionPolicy the install ships (the
// chart renders the same), relative to the repository root.
const LabelPolicyFile = "deploy/omnia-controllers/promptpack-label-policy.yaml"

// InstallLabelPolicy installs the shipped label policy for namespace ns
// only (its binding narrowed to ns, both renamed after it), so other tests
// on the same control plane still see the controller stamp the label. It
// returns once the API server applies it: policies reach admission
// through an informer.
//
//nolint:contextcheck // test helper: it makes its own context.Background(), the only context the tests have
func InstallLabelPolicy(tb testing.TB, env *testenv.Env, ns string) {
	tb.Helper()
	ctx := context.Background()
	policy, binding := &admissionv1.MutatingAdmissionPolicy{}, &admissionv1.MutatingAdmissionPolicyBinding{}
	installPolicy(tb, env, ns, LabelPolicyFile, policy, binding, func(name string, match *admissionv1.MatchResources) string {
		was := binding.Spec.PolicyName
		binding.Spec.PolicyName, binding.Spec.MatchResources = name, match
		return was
	})
	n := 0
	Eventually(tb, 30*time.Second, func() error {
		n++
		p := &omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("policy-probe-%d", n), Namespace: ns},
			Spec: omniav1.PromptPackSpec{PackName: "policy-probe", Version: "1.0.0",
				Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: "none"}}}}
		if err := env.Client.Create(ctx, p); err != nil {
			return err
		}
		_ = env.Client.Delete(ctx, p)
		if p.Labels[omniav1.LabelPromptPack] != "policy-probe" {
			return fmt.Errorf("the policy is not applied yet: labels %v", p.Labels)
		}
		return nil
	})
}

// CreatePackVersions is the PromptPack workload of docs/benchmarks.md:
// names pack names × versions versions (pack-NNN-vMM, version M.0.0), each
// with a ConfigMap holding ValidPack, created on w goroutines through c,
// newest versions first so that convergence has to supersede.
func CreatePackVersions(ctx context.Context, c client.Client, ns string, names, versions, w int) error {
	var wg sync.WaitGroup
	work := make(chan [2]int)
	errs := make(chan error, 1)
	for range w {
		wg.Go(func() {
			for nv := range work {
				if err := createVersion(ctx, c, ns, nv[0], nv[1]); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for ver := versions; ver >= 1; ver-- {
		for n := range names {
			work <- [2]int{n, ver}
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func createVersion(ctx context.Context, c client.Client, ns string, n, ver int) error {
	name := fmt.Sprintf("pack-%03d-v%02d", n, ver)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{omniav1.PackJSONKey: ValidPack}}
	if err := c.Create(ctx, cm); err != nil {
		return err
	}
	p := &omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: omniav1.PromptPackSpec{
		PackName: fmt.Sprintf("pack-%03d", n), Version: fmt.Sprintf("%d.0.0", ver),
		Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: name}}}}
	return c.Create(ctx, p)
}

// WaitPacksConverged polls the PromptPacks of ns every 200 ms until each
// of CreatePackVersions' is in the phase the newest-version rule gives it
// (Active for the newest version, Superseded below), and fails tb after
// within.
func WaitPacksConverged(tb testing.TB, ctx context.Context, c client.Reader, ns string, names, versions int, within time.Duration) {
	tb.Helper()
	start := time.Now()
	newest := fmt.Sprintf("%d.0.0", versions)
	for {
		var packs omniav1.PromptPackList
		if err := c.List(ctx, &packs, client.InNamespace(ns)); err != nil {
			tb.Fatal(err)
		}
		done := 0
		for _, p := range packs.Items {
			want := omniav1.PromptPackPhaseSuperseded
			if p.Spec.Version == newest {
				want = omniav1.PromptPackPhaseActive
			}
			if p.Status.Phase == want {
				done++
			}
		}
		if done == names*versions {
			return
		}
		if time.Since(start) > within {
			tb.Fatalf("only %d of %d PromptPacks converged within %s", done, names*versions, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
