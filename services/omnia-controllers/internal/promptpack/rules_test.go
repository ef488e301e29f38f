package promptpack

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// TestTransientAPIFailureIsReturned: when a call to the API server fails,
// the reconciler returns the error, for each read and the status write of
// a PromptPack pass; and success is not requeued: once the failure clears
// the pass succeeds with an empty Result.
func TestTransientAPIFailureIsReturned(t *testing.T) {
	ns, ctx, c := ctrltest.ByHand(t, env) // cache and indexes only
	cases := []ctrltest.Failure{
		{Name: "reading the ConfigMap fails", Fail: ctrltest.Call("get", &corev1.ConfigMap{})},
		{Name: "listing the sibling versions fails", Fail: ctrltest.Call("list", &omniav1.PromptPackList{})},
		{Name: "listing the AgentRuntimes fails", Fail: ctrltest.Call("list", &omniav1.AgentRuntimeList{})},
		{Name: "writing the status fails", Fail: ctrltest.Call("status", &omniav1.PromptPack{})},
		{Name: "nothing fails: success is not requeued"},
	}
	newR := func(c client.Client) reconcile.Reconciler { return &Reconciler{Client: c, Validator: mustValidator(t)} }
	ctrltest.CheckFailuresReturned(t, c, newR, cases, func(t *testing.T, i int) reconcile.Request {
		name := fmt.Sprintf("p%d", i)
		createPack(t, ns, name, name, "1.0.0", validPack) // a pack name of its own: no siblings
		ctrltest.Eventually(t, wait, func() error {
			if _, err := getCached(c, ns, name); err != nil {
				return err
			}
			return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-cm"}, &corev1.ConfigMap{})
		})
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
	}, func(t *testing.T, req reconcile.Request) {
		// The retries controller-runtime would make (after the error,
		// and after any event a stale cache hid); every successful pass
		// must ask for nothing.
		ctrltest.Eventually(t, wait, ctrltest.Retried(t, ctx, newR(c), req, phaseIs(ns, req.Name, omniav1.PromptPackPhaseActive)))
	})
}

// TestPublishedVersionIsImmutable: a PromptPack is an immutable version
// of a pack's content, as the controller relies on it:
// the API server refuses any spec change of a stored version (so a
// validated version cannot turn into another one under the same name),
// while metadata such as the controller's own pack-name label may change.
func TestPublishedVersionIsImmutable(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	createPack(t, ns, "a", "support", "1.0.0", validPack)
	cases := []struct {
		name    string
		mut     func(p *omniav1.PromptPack)
		refused bool
	}{
		{"changing the version is refused", func(p *omniav1.PromptPack) { p.Spec.Version = "1.0.1" }, true},
		{"pointing at another ConfigMap is refused", func(p *omniav1.PromptPack) { p.Spec.Source.ConfigMapRef.Name = "other" }, true},
		{"changing the pack name is refused", func(p *omniav1.PromptPack) { p.Spec.PackName = "other" }, true},
		{"a label change is accepted", func(p *omniav1.PromptPack) { p.Labels = map[string]string{"team": "support"} }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := getPack(ns, "a")
			if err != nil {
				t.Fatal(err)
			}
			tc.mut(p)
			err = env.Client.Update(ctx, p)
			if refused := err != nil && strings.Contains(err.Error(), "immutable"); refused != tc.refused {
				t.Fatalf("update error %v; want refused=%v", err, tc.refused)
			}
		})
	}
}
