package controller

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// TestAJobCreatedBeforeALostRunningPatchHoldsItsSlot: on a Station with one
// slot, run "first" gets its Job but every patch to Running conflicts. The
// Job runs all the same, so "second", created next, is queued and gets no
// Job; once the patch goes through, "first" is Running and "second" is
// still queued.
func TestAJobCreatedBeforeALostRunningPatchHoldsItsSlot(t *testing.T) {
	ns := env.Namespace(t)
	var losing atomic.Bool
	losing.Store(true)
	var lost atomic.Int32
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	c := interceptor.NewClient(base, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if sub == "status" && obj.GetName() == "first" && losing.Load() {
				lost.Add(1)
				return apierrors.NewConflict(schema.GroupResource{Group: agentsv1alpha1.GroupVersion.Group, Resource: "agents"}, "first",
					errors.New("the object has been modified"))
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	ctl := New(c, env.Kube, metrics.New(), Options{Namespace: ns, PollInterval: time.Hour, Log: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	mkStation(t, ns, "st", func(s *agentsv1alpha1.StationSpec) { s.MaxConcurrentRuns = 1 })
	mkAgent(t, ns, "first", "st")
	eventually(t, "the Job of first, and its patch to Running lost", func() bool {
		_, err := env.Kube.BatchV1().Jobs(ns).Get(context.Background(), "agent-job-first", metav1.GetOptions{})
		return err == nil && lost.Load() > 0
	})
	mkAgent(t, ns, "second", "st")
	started := func() *metav1.Condition {
		return meta.FindStatusCondition(getAgent(t, ns, "second").Status.Conditions, agentsv1alpha1.ConditionStarted)
	}
	eventually(t, "second to be decided", func() bool { return started() != nil })
	secondQueued := func(when string) {
		t.Helper()
		if c := started(); c.Reason != agentsv1alpha1.ReasonQueued {
			t.Fatalf("%s: second was admitted (%s: %s) while first's Job held the Station's one slot", when, c.Reason, c.Message)
		}
		if _, err := env.Kube.BatchV1().Jobs(ns).Get(context.Background(), "agent-job-second", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s: second has a Job (%v): two runs on a Station of one", when, err)
		}
	}
	secondQueued("while first's patch is lost")

	// The patch goes through at first's next pass, woken by any change.
	losing.Store(false)
	a := getAgent(t, ns, "first")
	a.Annotations = map[string]string{"test/wake": "1"}
	if err := env.Client.Update(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "first", agentsv1alpha1.PhaseRunning)
	secondQueued("once first is Running")
}
