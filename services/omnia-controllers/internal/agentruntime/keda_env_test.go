package agentruntime

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// kedaCRD is KEDA's ScaledObject CRD (testdata names its source).
var kedaCRD = envtest.CRDInstallOptions{Paths: []string{filepath.Join("testdata", "keda.sh_scaledobjects.yaml")}}

// uninstallKEDA removes KEDA's CRD and waits until the API server no
// longer serves the kind. The deletion takes a while (the ScaledObjects
// go first); a manager started meanwhile would find the kind served, wire
// a watch whose list then fails, and never start its controller: the next
// test would see no pass at all.
func uninstallKEDA(t *testing.T) {
	t.Helper()
	if err := envtest.UninstallCRDs(env.Config, kedaCRD); err != nil {
		t.Errorf("uninstall KEDA's CRD: %v", err)
		return
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	gv := ScaledObjectGVK.GroupVersion().String()
	ctrltest.Eventually(t, 2*wait, func() error {
		_, err := dc.ServerResourcesForGroupVersion(gv)
		return ctrltest.Gone("the served "+gv, err)
	})
}

// getScaledObject reads the agent's ScaledObject through the API server.
//
//nolint:contextcheck // test helper: it makes its own context.Background(), the only context the tests here have
func getScaledObject(ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ScaledObjectGVK)
	return u, env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, u)
}

func scaledObjectMax(ns, name string, want int64) func() error {
	return func() error {
		u, err := getScaledObject(ns, name)
		if err != nil {
			return err
		}
		if n, _, _ := unstructured.NestedInt64(u.Object, "spec", "maxReplicaCount"); n != want {
			return fmt.Errorf("maxReplicaCount %d, want %d", n, want)
		}
		return nil
	}
}

// TestKEDAScaledObject runs the controller on a control plane without
// KEDA's CRD, then installs it (only for this test: it is removed at the
// end): without it the agent reports KEDANotInstalled and makes no error
// loop; with it, the ScaledObject is written (the watch started by the
// first pass that finds the kind), an edit of it is repaired through that
// watch, and a switch to hpa replaces it with an HPA. A manager started
// with the CRD in place watches ScaledObjects from the start: a switch
// back to keda replaces the HPA, and an edit is repaired.
func TestKEDAScaledObject(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	cfg := testConfig
	cfg.PrometheusURL = testPrometheus
	cm, pack := packObjects(ns, "support-v1", "1.0.0", validPack)
	agent := newAgent(ns, "agent", kedaPolicy(func(as *omniav1.AutoscalingConfig) {
		as.MinReplicas, as.MaxReplicas = ptr(int32(0)), ptr(int32(3))
	}))
	ctrltest.Create(t, env, cm, pack, mockProvider(ns, "llm"), agent)
	key := types.NamespacedName{Namespace: ns, Name: "agent"}
	hpaGone := func() error {
		return ctrltest.Gone("HPA", env.Client.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{}))
	}
	editScaledObject := func(t *testing.T) {
		t.Helper()
		so, err := getScaledObject(ns, "agent")
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(so.Object, int64(50), "spec", "maxReplicaCount")
		if err := env.Client.Update(ctx, so); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a manager started without KEDA", func(t *testing.T) {
		passes := startAllWith(t, cfg)
		// Without the CRD: the condition, and then quiet. A returned error
		// would be retried with growing backoff, several passes in 3 s.
		ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionAutoscalingReady, omniav1.ReasonKEDANotInstalled))
		passes.Drain(time.Second)
		before := passes.Count(key)
		time.Sleep(3 * time.Second)
		if n := passes.Count(key) - before; n > 1 {
			t.Fatalf("%d passes in 3 s while KEDA is not installed; want at most one (no error loop)", n)
		}

		if _, err := envtest.InstallCRDs(env.Config, kedaCRD); err != nil {
			t.Fatal(err)
		}
		// KEDA installed: the next pass (an edit here; the 10-minute
		// recheck otherwise) writes the ScaledObject.
		update(t, &omniav1.AgentRuntime{}, ns, "agent", func(o client.Object) {
			o.(*omniav1.AgentRuntime).Spec.Runtime.Autoscaling.MaxReplicas = ptr(int32(4))
		})
		ctrltest.Eventually(t, wait, scaledObjectMax(ns, "agent", 4))
		ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionAutoscalingReady, omniav1.ReasonScaling))
		ctrltest.Holds(t, hpaGone)

		// Edited by someone: repaired through the ScaledObject watch the
		// pass started.
		editScaledObject(t)
		ctrltest.Eventually(t, wait, scaledObjectMax(ns, "agent", 4))

		// Switch to hpa: the ScaledObject goes, the HPA comes.
		update(t, &omniav1.AgentRuntime{}, ns, "agent", func(o client.Object) {
			as := o.(*omniav1.AgentRuntime).Spec.Runtime.Autoscaling
			as.Type, as.MinReplicas = omniav1.AutoscalerHPA, ptr(int32(1))
		})
		ctrltest.Eventually(t, wait, func() error {
			_, err := getScaledObject(ns, "agent")
			return ctrltest.Gone("ScaledObject", err)
		})
		ctrltest.Eventually(t, wait, func() error { return env.Client.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{}) })
	})
	t.Cleanup(func() { uninstallKEDA(t) })
	if t.Failed() {
		return
	}

	t.Run("a manager started with KEDA's CRD in place", func(t *testing.T) {
		startAllWith(t, cfg)
		update(t, &omniav1.AgentRuntime{}, ns, "agent", func(o client.Object) {
			as := o.(*omniav1.AgentRuntime).Spec.Runtime.Autoscaling
			as.Type, as.MaxReplicas = omniav1.AutoscalerKEDA, ptr(int32(5))
		})
		ctrltest.Eventually(t, wait, scaledObjectMax(ns, "agent", 5))
		ctrltest.Eventually(t, wait, hpaGone)
		// Repaired through the watch wired at start.
		editScaledObject(t)
		ctrltest.Eventually(t, wait, scaledObjectMax(ns, "agent", 5))
	})
}
