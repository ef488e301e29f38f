package sessionretention

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

const wait = 30 * time.Second

// newAgent is an agent of team.
func newAgent(ns, name, team string) *omniav1.AgentRuntime {
	a := ctrltest.Agent(ns, name, "pack")
	a.Labels = map[string]string{"team": team}
	return a
}

func newPolicy(ns, name string, sel *metav1.LabelSelector) *omniav1.SessionRetentionPolicy {
	return &omniav1.SessionRetentionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: omniav1.SessionRetentionPolicySpec{AgentSelector: sel, SessionTTL: metav1.Duration{Duration: time.Hour}}}
}

// state waits for a policy's status: the agents it is in force for and
// whether Conflict is True.
func state(ns, name string, appliesTo []string, conflict metav1.ConditionStatus) func() error {
	return ctrltest.ObjectIs(env.Client, types.NamespacedName{Namespace: ns, Name: name}, func(p *omniav1.SessionRetentionPolicy) error {
		c := meta.FindStatusCondition(p.Status.Conditions, omniav1.ConditionConflict)
		if !slices.Equal(p.Status.AppliesTo, appliesTo) || c == nil || c.Status != conflict || p.Status.ObservedGeneration != p.Generation {
			return fmt.Errorf("%s: appliesTo %v Conflict %+v; want %v %s", name, p.Status.AppliesTo, c, appliesTo, conflict)
		}
		return nil
	})
}

// TestPoliciesFollowAgentsAndEachOther: the agents a policy is in force
// for, and its Conflict condition, follow the namespace's AgentRuntimes
// (created, relabelled) and its other policies (created, deleted) through
// watches, the policies themselves never changing.
func TestPoliciesFollowAgentsAndEachOther(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	ctrltest.Start(t, env, newReconciler, nil)
	ctrltest.Create(t, env, newAgent(ns, "billing", "a"), newPolicy(ns, "team-a", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}))
	ctrltest.Eventually(t, wait, state(ns, "team-a", []string{"billing"}, metav1.ConditionFalse))

	t.Run("an agent created with the label joins", func(t *testing.T) {
		ctrltest.Create(t, env, newAgent(ns, "search", "a"))
		ctrltest.Eventually(t, wait, state(ns, "team-a", []string{"billing", "search"}, metav1.ConditionFalse))
	})
	t.Run("an agent relabelled away leaves", func(t *testing.T) {
		a := ctrltest.Get[omniav1.AgentRuntime](t, env, types.NamespacedName{Namespace: ns, Name: "search"})
		a.Labels["team"] = "b"
		if err := env.Client.Update(ctx, a); err != nil {
			t.Fatal(err)
		}
		ctrltest.Eventually(t, wait, state(ns, "team-a", []string{"billing"}, metav1.ConditionFalse))
	})
	t.Run("a younger policy over all agents conflicts on both, naming the other and the older as in force", func(t *testing.T) {
		// creationTimestamp has whole seconds: the second policy is younger.
		time.Sleep(1100 * time.Millisecond)
		ctrltest.Create(t, env, newPolicy(ns, "all", nil))
		ctrltest.Eventually(t, wait, state(ns, "all", []string{"search"}, metav1.ConditionTrue))
		ctrltest.Eventually(t, wait, state(ns, "team-a", []string{"billing"}, metav1.ConditionTrue))
		p := ctrltest.Get[omniav1.SessionRetentionPolicy](t, env, types.NamespacedName{Namespace: ns, Name: "all"})
		if msg := meta.FindStatusCondition(p.Status.Conditions, omniav1.ConditionConflict).Message; !strings.Contains(msg, "team-a is in force") {
			t.Fatalf("Conflict message %q", msg)
		}
	})
	t.Run("the older policy deleted, the younger takes its agents", func(t *testing.T) {
		if err := env.Client.Delete(ctx, newPolicy(ns, "team-a", nil)); err != nil {
			t.Fatal(err)
		}
		ctrltest.Eventually(t, wait, state(ns, "all", []string{"billing", "search"}, metav1.ConditionFalse))
	})
}

// TestThreeWorkers: the controller runs up to three passes at once.
func TestThreeWorkers(t *testing.T) {
	ctrltest.CheckWorkers(t, env, newReconciler, 500*time.Millisecond, 3, 6, func(ns, name string) client.Object { return newPolicy(ns, name, nil) })
}

func newReconciler(c client.Client) ctrltest.Wirer { return &Reconciler{Client: c} }
