package agentruntime

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/rollout"
)

// candidateGuard watches the controller's deletes of the candidate
// Deployment: each one must find the stable Deployment already running
// the promoted version on every replica, or traffic is dropped.
type candidateGuard struct {
	ns string

	mu         sync.Mutex
	deletes    int
	violations []string
}

func (g *candidateGuard) onDelete(ctx context.Context, obj client.Object) {
	if _, ok := obj.(*appsv1.Deployment); !ok || obj.GetName() != "agent"+CandidateSuffix {
		return
	}
	stable := &appsv1.Deployment{}
	err := env.Client.Get(ctx, types.NamespacedName{Namespace: g.ns, Name: "agent"}, stable)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deletes++
	switch {
	case err != nil:
		g.violations = append(g.violations, fmt.Sprintf("candidate deleted with no stable Deployment: %v", err))
	case roEnv(stable, "OMNIA_PROMPTPACK_VERSION") != "1.1.0" || !rollout.StableComplete(stable) || stable.Status.AvailableReplicas == 0:
		g.violations = append(g.violations, fmt.Sprintf("candidate deleted while the stable Deployment ran version %q with %d of %d replicas available",
			roEnv(stable, "OMNIA_PROMPTPACK_VERSION"), stable.Status.AvailableReplicas, roReplicas(stable)))
	}
}

func (g *candidateGuard) report() (int, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deletes, append([]string(nil), g.violations...)
}

// TestPromotionSurvivesFailedWrites: a promotion after setWeight 100 (the
// stable Deployment at zero, the candidate serving everything) whose
// status write or spec write fails once is retried, and the candidate is
// removed only once the stable Deployment runs the promoted version on
// every replica. Before the promotion was recorded ahead of its spec
// write, a lost status write made the next pass see a finished rollout
// and remove the candidate at once.
func TestPromotionSurvivesFailedWrites(t *testing.T) {
	injected := apierrors.NewServiceUnavailable("injected failure")
	cases := []struct {
		name string
		// fail reports whether a write is the one to fail (once).
		fail func(verb string, obj client.Object) bool
	}{
		{"the status write recording the promotion fails", func(verb string, obj client.Object) bool {
			a, ok := obj.(*omniav1.AgentRuntime)
			return ok && verb == "status" && a.Status.Rollout != nil && a.Status.Rollout.Promoting
		}},
		{"the spec write of the promotion fails", func(verb string, obj client.Object) bool {
			a, ok := obj.(*omniav1.AgentRuntime)
			return ok && verb == "update" && a.Spec.PromptPackRef.Version != nil && *a.Spec.PromptPackRef.Version == "1.1.0"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			guard := &candidateGuard{ns: ns}
			var failed atomic.Bool
			log := &deploymentLog{}
			// The write tc.fail picks fails once; the candidate's delete
			// is checked against the stable Deployment first.
			startIntercepted(t, withWriteHooks(interceptor.Funcs{}, func(ctx context.Context, verb string, obj client.Object) error {
				if verb == "delete" {
					guard.onDelete(ctx, obj)
				}
				if tc.fail(verb, obj) && failed.CompareAndSwap(false, true) {
					return injected
				}
				return nil
			}, log.record))
			rolloutAgent(t, ns, func(a *omniav1.AgentRuntime) {
				a.Spec.Rollout = &omniav1.RolloutConfig{
					Candidate:      roToV110(),
					Steps:          []omniav1.RolloutStep{{SetWeight: ptr(int32(100))}},
					TrafficRouting: &omniav1.TrafficRoutingConfig{Mode: omniav1.TrafficRoutingReplicaWeighted},
				}
			})
			// Play the kubelet until the promotion is over.
			ctrltest.Eventually(t, 3*wait, func() error {
				if _, violations := guard.report(); len(violations) > 0 {
					t.Fatalf("the candidate was removed too early: %v", violations)
				}
				return roPromoted(ns, nil)()
			})
			if !failed.Load() {
				t.Fatal("the write to fail never happened")
			}
			deletes, violations := guard.report()
			if len(violations) > 0 {
				t.Fatalf("the candidate was removed too early: %v", violations)
			}
			if deletes == 0 {
				t.Fatal("the candidate Deployment was never deleted")
			}
			if err := rolloutWritesForward(log.list()); err != nil {
				t.Fatalf("%v; the writes: %v", err, log.list())
			}
			a := mustAgent(t, ns, "agent")
			if *a.Spec.PromptPackRef.Version != "1.1.0" || a.Spec.Rollout.Candidate != nil {
				t.Fatalf("spec.promptPackRef %+v, candidate %+v; want 1.1.0 promoted and the candidate cleared", a.Spec.PromptPackRef, a.Spec.Rollout.Candidate)
			}
			stable, err := roDeployment(ns, "agent")
			if err != nil {
				t.Fatal(err)
			}
			if roReplicas(stable) != 2 || roEnv(stable, "OMNIA_PROMPTPACK_VERSION") != "1.1.0" {
				t.Fatalf("stable replicas %d version %q", roReplicas(stable), roEnv(stable, "OMNIA_PROMPTPACK_VERSION"))
			}
		})
	}
}

// startIntercepted runs the controllers as startAll does, the
// AgentRuntime reconciler's client wrapped with funcs.
func startIntercepted(t *testing.T, funcs interceptor.Funcs) {
	t.Helper()
	startStack(t, func(_ ctrl.Manager, r *Reconciler) reconcile.Reconciler {
		r.Client = ctrltest.Intercept(r.Client, funcs)
		return nil
	})
}
