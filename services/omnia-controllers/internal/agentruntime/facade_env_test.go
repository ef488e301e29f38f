package agentruntime

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// facadeClient is a client acting as an agent's facade: authenticated by
// a token the API server issued for the <name>-facade ServiceAccount
// (TokenRequest), as the kubelet mounts one into the pod.
func facadeClient(t *testing.T, ns, agent string) client.Client {
	t.Helper()
	ctrltest.Eventually(t, wait, func() error {
		return env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: FacadeRBACName(agent)}, &corev1.ServiceAccount{})
	})
	return serviceAccountClient(t, ns, FacadeRBACName(agent), nil)
}

// TestFacadeReportsActivityWithItsOwnToken: the facade's token may read
// its agent and report its sessions, and nothing else; its reports drive
// the idle deadline: an agent with a session open is never reaped, one
// idle past the deadline is, and it wakes for the next session.
func TestFacadeReportsActivityWithItsOwnToken(t *testing.T) {
	ns, clock, res := startIdle(t, nil)
	ctx := context.Background()
	ctrltest.Create(t, env, newAgent(ns, "other", nil))
	fc := facadeClient(t, ns, "agent")
	pod := livePod(t, ns, "agent")

	t.Run("the Role lets the facade read its agent and apply its report to its status", func(t *testing.T) {
		if err := fc.Get(ctx, types.NamespacedName{Namespace: ns, Name: "agent"}, &omniav1.AgentRuntime{}); err != nil {
			t.Fatalf("get own agent: %v", err)
		}
		ctrltest.Eventually(t, wait, func() error { return applyReport(fc, ns, "agent", pod, 1, clock.Now()) })
	})
	for _, c := range []struct {
		rule string
		do   func() error
	}{
		{"another agent's status cannot be patched", func() error { return applyReport(fc, ns, "other", pod, 0, clock.Now()) }},
		{"another agent cannot be read", func() error {
			return fc.Get(ctx, types.NamespacedName{Namespace: ns, Name: "other"}, &omniav1.AgentRuntime{})
		}},
		{"its own spec cannot be changed", func() error {
			a := &omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}}
			return fc.Patch(ctx, a, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"idleTimeout":"100h"}}`)))
		}},
		{"Secrets of its namespace cannot be listed", func() error { return fc.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)) }},
	} {
		t.Run(c.rule, func(t *testing.T) {
			if err := c.do(); !apierrors.IsForbidden(err) {
				t.Fatalf("got %v, want Forbidden", err)
			}
		})
	}

	t.Run("an agent with a session open is never reaped", func(t *testing.T) {
		clock.Set(clock.Now().Add(24 * time.Hour))
		res.pokeAndWait(t, ns, "agent")
		ctrltest.Eventually(t, wait, idleIs(ns, "agent", metav1.ConditionFalse, omniav1.ReasonActive))
		ctrltest.Holds(t, replicasAre(ns, "agent", 1), res.requeueIs(ns, "agent", 0))
	})
	t.Run("an agent idle past the deadline since its last session closed is reaped", func(t *testing.T) {
		if err := applyReport(fc, ns, "agent", pod, 0, clock.Now()); err != nil {
			t.Fatal(err)
		}
		reapedAtDeadline(t, ns, clock, res, 1)
	})
	t.Run("a reaped agent wakes for the next session and stays up while it is open", func(t *testing.T) {
		requestWake(t, ns, clock)
		ctrltest.Eventually(t, wait, replicasAre(ns, "agent", 1))
		pod := livePod(t, ns, "agent")
		if err := applyReport(fc, ns, "agent", pod, 1, clock.Now()); err != nil {
			t.Fatal(err)
		}
		ctrltest.Eventually(t, wait, idleIs(ns, "agent", metav1.ConditionFalse, omniav1.ReasonActive))
		clock.Set(clock.Now().Add(24 * time.Hour))
		res.pokeAndWait(t, ns, "agent")
		ctrltest.Holds(t, replicasAre(ns, "agent", 1))
	})
}

// TestFacadeAccessAndBudgetAreOwned: the facade's ServiceAccount, Role and
// RoleBinding are created for every agent, controlled by it and repaired
// when deleted or edited; the PodDisruptionBudget follows the replica
// count.
func TestFacadeAccessAndBudgetAreOwned(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	startAll(t)
	createWithInputs(t, ns, newAgent(ns, "agent", nil))
	key := types.NamespacedName{Namespace: ns, Name: FacadeRBACName("agent")}
	owned := func(obj client.Object) func() error {
		return func() error {
			if err := env.Client.Get(ctx, key, obj); err != nil {
				return err
			}
			if c := metav1.GetControllerOf(obj); c == nil || c.Name != "agent" || c.Kind != "AgentRuntime" {
				return fmt.Errorf("%T controller %+v", obj, c)
			}
			return nil
		}
	}
	for _, obj := range []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		ctrltest.Eventually(t, wait, owned(obj))
	}

	t.Run("an edited Role is repaired", func(t *testing.T) {
		update(t, &rbacv1.Role{}, ns, key.Name, func(o client.Object) {
			r := o.(*rbacv1.Role)
			r.Rules[1].Verbs = []string{"get", "patch", "update"}
		})
		ctrltest.Eventually(t, wait, ctrltest.ObjectIs(env.Client, key, func(r *rbacv1.Role) error {
			if len(r.Rules) != 2 || len(r.Rules[1].Verbs) != 2 {
				return fmt.Errorf("rules %+v", r.Rules)
			}
			return nil
		}))
	})
	t.Run("a deleted RoleBinding is recreated", func(t *testing.T) {
		if err := env.Client.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}}); err != nil {
			t.Fatal(err)
		}
		ctrltest.Eventually(t, wait, owned(&rbacv1.RoleBinding{}))
	})
	pdbKey := types.NamespacedName{Namespace: ns, Name: "agent"}
	t.Run("no PodDisruptionBudget for one replica", func(t *testing.T) {
		ctrltest.Holds(t, func() error {
			return ctrltest.Gone("pdb", env.Client.Get(ctx, pdbKey, &policyv1.PodDisruptionBudget{}))
		})
	})
	t.Run("a PodDisruptionBudget for three replicas, gone again at one", func(t *testing.T) {
		setReplicas := func(n int32) {
			update(t, &omniav1.AgentRuntime{}, ns, "agent", func(o client.Object) {
				o.(*omniav1.AgentRuntime).Spec.Runtime = &omniav1.RuntimeConfig{Replicas: ptr(n)}
			})
		}
		setReplicas(3)
		ctrltest.Eventually(t, wait, ctrltest.ObjectIs(env.Client, pdbKey, func(p *policyv1.PodDisruptionBudget) error {
			if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntVal != 1 || !metav1.IsControlledBy(p, mustAgent(t, ns, "agent")) {
				return fmt.Errorf("pdb %+v", p.Spec)
			}
			return nil
		}))
		setReplicas(1)
		ctrltest.Eventually(t, wait, func() error {
			return ctrltest.Gone("pdb", env.Client.Get(ctx, pdbKey, &policyv1.PodDisruptionBudget{}))
		})
	})
}
