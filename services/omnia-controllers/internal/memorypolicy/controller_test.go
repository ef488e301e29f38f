package memorypolicy

import (
	"context"
	"fmt"
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

func ready(ns, name string, status metav1.ConditionStatus, reason, msgHas string, count int32) func() error {
	return ctrltest.ObjectIs(env.Client, types.NamespacedName{Namespace: ns, Name: name}, func(p *omniav1.MemoryPolicy) error {
		c := meta.FindStatusCondition(p.Status.Conditions, omniav1.ConditionReady)
		if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, msgHas) || p.Status.AgentCount != count || c.ObservedGeneration != p.Generation {
			return fmt.Errorf("Ready %+v agents %d; want %s %s %q, %d agents", c, p.Status.AgentCount, status, reason, msgHas, count)
		}
		return nil
	})
}

// TestBadPatternThenFixed: a redaction pattern that does not compile sets
// Ready=False naming the field, and the policy is in force for no agent;
// an edit that fixes it makes the policy Ready and in force.
func TestBadPatternThenFixed(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	ctrltest.Start(t, env, newReconciler, nil)
	a := ctrltest.Agent(ns, "chat", "pack")
	p := &omniav1.MemoryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pii", Namespace: ns},
		Spec: omniav1.MemoryPolicySpec{Redact: []omniav1.RedactionRule{{Category: omniav1.PIIEmail}, {Pattern: `ACC-(\d{8}`}}}}
	ctrltest.Create(t, env, a, p)
	ctrltest.Eventually(t, wait, ready(ns, "pii", metav1.ConditionFalse, omniav1.ReasonInvalidRedaction, "spec.redact[1].pattern", 0))
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pii"}, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Redact[1].Pattern = `ACC-(\d{8})`
	if err := env.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, ready(ns, "pii", metav1.ConditionTrue, omniav1.ReasonPolicyValid, "2 redaction rules", 1))
}

// TestThreeWorkers: the controller runs up to three passes at once.
func TestThreeWorkers(t *testing.T) {
	ctrltest.CheckWorkers(t, env, newReconciler, 500*time.Millisecond, 3, 6, func(ns, name string) client.Object {
		return &omniav1.MemoryPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	})
}

func newReconciler(c client.Client) ctrltest.Wirer { return &Reconciler{Client: c} }
