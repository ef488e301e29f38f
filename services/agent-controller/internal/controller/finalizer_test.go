package controller

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

const otherFinalizer = "example.com/keep"

// insertFinalizerFirst is someone else's concurrent change: it shifts our
// entry's index.
func insertFinalizerFirst(t *testing.T, ns, name string) {
	t.Helper()
	obj := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := []byte(`[{"op":"add","path":"/metadata/finalizers/0","value":"` + otherFinalizer + `"}]`)
	if err := env.Client.Patch(context.Background(), obj, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

func TestBatchFinalizerPatchesTouchOnlyTheirEntry(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "a", "st")
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctl := New(c, env.Kube, metrics.New(), Options{Namespace: ns, Log: quiet})

	stale := getAgent(t, ns, "a")
	if err := ctl.ensureFinalizer(ctx, stale); err != nil {
		t.Fatalf("add to an empty list: %v", err)
	}
	if got := getAgent(t, ns, "a").Finalizers; !slices.Equal(got, []string{agentsv1alpha1.BatchCleanupFinalizer}) {
		t.Fatalf("finalizers %v", got)
	}

	t.Run("an add computed from a stale empty list is refused, not overwriting", func(t *testing.T) {
		mkAgent(t, ns, "b", "st")
		stale := getAgent(t, ns, "b")
		obj := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}}
		if err := env.Client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType,
			[]byte(`[{"op":"add","path":"/metadata/finalizers","value":["`+otherFinalizer+`"]}]`))); err != nil {
			t.Fatal(err)
		}
		if err := ctl.ensureFinalizer(ctx, stale); err == nil {
			t.Fatal("a patch guarded by a stale resourceVersion went through")
		}
		if err := ctl.ensureFinalizer(ctx, getAgent(t, ns, "b")); err != nil {
			t.Fatal(err)
		}
		if got := getAgent(t, ns, "b").Finalizers; !slices.Equal(got, []string{otherFinalizer, agentsv1alpha1.BatchCleanupFinalizer}) {
			t.Errorf("finalizers %v, want both", got)
		}
	})

	t.Run("a finalizer added concurrently survives our removal", func(t *testing.T) {
		stale := getAgent(t, ns, "a") // ours at index 0
		insertFinalizerFirst(t, ns, "a")
		if res, _ := ctl.removeFinalizer(ctx, stale); res != resultConflict {
			t.Errorf("removal at a shifted index: result %q, want conflict", res)
		}
		if got := getAgent(t, ns, "a").Finalizers; !slices.Equal(got, []string{otherFinalizer, agentsv1alpha1.BatchCleanupFinalizer}) {
			t.Fatalf("finalizers %v after a refused removal", got)
		}
		if res, err := ctl.removeFinalizer(ctx, getAgent(t, ns, "a")); res != resultOK || err != nil {
			t.Fatalf("removal: %s %v", res, err)
		}
		if got := getAgent(t, ns, "a").Finalizers; !slices.Equal(got, []string{otherFinalizer}) {
			t.Errorf("finalizers %v, want only %s", got, otherFinalizer)
		}
	})
}
