package toolpolicy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

const wait = 30 * time.Second

// start runs the ToolPolicy controller, its passes counted.
func start(t *testing.T) *ctrltest.Counter {
	t.Helper()
	var counter *ctrltest.Counter
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("toolpolicy-controller")}
		counter = &ctrltest.Counter{Inner: r}
		return r.SetupWithManager(mgr, counter)
	})
	return counter
}

func get(ns, name string) (*omniav1.ToolPolicy, error) {
	p := &omniav1.ToolPolicy{}
	return p, env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p)
}

// statusIs waits for phase, the Ready reason and the Compiled condition
// of the policy's current generation.
func statusIs(ns, name string, phase omniav1.ToolPolicyPhase, reason string, rules int32) func() error {
	return func() error {
		p, err := get(ns, name)
		if err != nil {
			return err
		}
		if err := ctrltest.PhaseReason(p.Status.Phase, p.Status.Conditions, phase, omniav1.ConditionReady, reason); err != nil {
			return err
		}
		if p.Status.ObservedGeneration != p.Generation || p.Status.RuleCount != rules {
			return fmt.Errorf("observedGeneration %d of %d, ruleCount %d; want %d", p.Status.ObservedGeneration, p.Generation, p.Status.RuleCount, rules)
		}
		return nil
	}
}

func eventFor(ns, name, typ, reason, note string) func() error {
	return func() error {
		var evs eventsv1.EventList
		if err := env.Client.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == name && e.Type == typ && e.Reason == reason && strings.Contains(e.Note, note) {
				return nil
			}
		}
		return fmt.Errorf("no %s %s event on %s containing %q among %d events", typ, reason, name, note, len(evs.Items))
	}
}

// TestCompileErrorThenFix: a policy whose expressions compile becomes
// Active, an edit that breaks a rule turns it Error with the compiler's
// words in the condition and a Warning event, and the fix makes it Active
// again; each through the ToolPolicy watch alone. A converged policy is
// not written again: its own status write does not bring it back.
func TestCompileErrorThenFix(t *testing.T) {
	ns := env.Namespace(t)
	passes := start(t)
	ctx := context.Background()
	p := policy(0, []omniav1.ToolPolicyRule{rule("no-drop", `headers["X-Omnia-Tool-Name"] == "drop_table"`), rule("big", "body.amount > 1000")})
	p.Namespace = ns
	ctrltest.Create(t, env, p)
	ctrltest.Eventually(t, wait, statusIs(ns, "pol", omniav1.ToolPolicyPhaseActive, omniav1.ReasonPolicyValidated, 2))
	ctrltest.Eventually(t, wait, eventFor(ns, "pol", "Normal", omniav1.EventPolicyCompiled, "2 rule(s)"))

	passes.Drain(time.Second)
	settled, err := get(ns, "pol")
	if err != nil {
		t.Fatal(err)
	}
	n := passes.Count(client.ObjectKeyFromObject(p))
	time.Sleep(2 * time.Second)
	again, err := get(ns, "pol")
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != settled.ResourceVersion || passes.Count(client.ObjectKeyFromObject(p)) != n {
		t.Fatalf("a converged policy was reconciled or written again: resourceVersion %s → %s, passes %d → %d",
			settled.ResourceVersion, again.ResourceVersion, n, passes.Count(client.ObjectKeyFromObject(p)))
	}

	again.Spec.Rules[1].Deny.CEL = "body.amount >"
	if err := env.Client.Update(ctx, again); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, statusIs(ns, "pol", omniav1.ToolPolicyPhaseError, omniav1.ReasonCompileError, 1))
	ctrltest.Eventually(t, wait, eventFor(ns, "pol", "Warning", omniav1.EventCompileError, `rule "big": ERROR: <input>:1:14: Syntax error`))

	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), again); err != nil {
		t.Fatal(err)
	}
	again.Spec.Rules[1].Deny.CEL = "body.amount > 10"
	if err := env.Client.Update(ctx, again); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, statusIs(ns, "pol", omniav1.ToolPolicyPhaseActive, omniav1.ReasonPolicyValidated, 2))
}

// TestOneWorker: the ToolPolicy controller runs controller-runtime's
// default of one reconcile at a time, as every controller whose count
// docs/omnia-controllers.md does not raise.
func TestOneWorker(t *testing.T) {
	ctrltest.CheckWorkers(t, env, newReconciler, 300*time.Millisecond, 1, 4, func(ns, name string) client.Object {
		p := policy(0, []omniav1.ToolPolicyRule{rule("r", "false")})
		p.Namespace, p.Name = ns, name
		return p
	})
}

func newReconciler(c client.Client) ctrltest.Wirer { return &Reconciler{Client: c} }
