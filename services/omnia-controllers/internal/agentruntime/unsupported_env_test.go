package agentruntime

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// TestUnsupportedFieldsReportedAgentRuns: with the binary's controllers,
// an agent that sets fields the platform does not implement reports them
// in Unsupported=True/FieldsNotImplemented, with one Warning event, and
// still reaches Running. Passes that change nothing write no status; an
// edit that changes the list rewrites the message with one event more. A
// Provider that sets spec.tts reports it the same way.
func TestUnsupportedFieldsReportedAgentRuns(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	var statusWrites atomic.Int64
	counter := &ctrltest.Counter{}
	startStack(t, func(_ ctrl.Manager, r *Reconciler) reconcile.Reconciler {
		r.Client = ctrltest.Intercept(r.Client, interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if _, ok := obj.(*omniav1.AgentRuntime); ok && sub == "status" {
					statusWrites.Add(1)
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		})
		counter.Inner = r
		return counter
	})
	cm, pack := packObjects(ns, "support-v1", "1.0.0", validPack)
	tts := &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "voice", Namespace: ns}, Spec: omniav1.ProviderSpec{
		Type: omniav1.ProviderTypeCartesia, Role: omniav1.ProviderRoleTTS, Model: "sonic", TTS: &omniav1.TTSConfig{Voice: "v"}}}
	ctrltest.Create(t, env, cm, pack, mockProvider(ns, "llm"), tts, newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.Evals = &omniav1.EvalConfig{Enabled: true}
		a.Spec.Media = &omniav1.MediaConfig{}
		a.Spec.Facades[0].ExtraEnv = []corev1.EnvVar{{Name: "A", Value: "b"}}
	}))
	ctrltest.Eventually(t, wait, conditionSays(ns, "agent", omniav1.ConditionUnsupported, metav1.ConditionTrue, omniav1.ReasonFieldsNotImplemented,
		": spec.evals, spec.facades[].extraEnv, spec.media"))
	markPodsReady(t, ns, "agent")
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhaseRunning, omniav1.ConditionReady, omniav1.ReasonRuntimeReady))
	ctrltest.Eventually(t, wait, ctrltest.ObjectIs(env.Client, types.NamespacedName{Namespace: ns, Name: "voice"}, func(p *omniav1.Provider) error {
		c := meta.FindStatusCondition(p.Status.Conditions, omniav1.ConditionUnsupported)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != omniav1.ReasonFieldsNotImplemented || c.Message == "" {
			return fmt.Errorf("Provider Unsupported = %+v", c)
		}
		return nil
	}))

	// Passes that change nothing write no status. The Deployment's
	// status settles first (available after ready), which the agent's
	// status records.
	ctrltest.Eventually(t, wait, func() error {
		a := mustAgent(t, ns, "agent")
		if r := a.Status.Replicas; r == nil || r.Desired != 1 || r.Ready != 1 || r.Available != 1 {
			return fmt.Errorf("replicas %+v", r)
		}
		return nil
	})
	key := types.NamespacedName{Namespace: ns, Name: "agent"}
	counter.Drain(5 * time.Second)
	writes, passes := statusWrites.Load(), counter.Count(key)
	a := mustAgent(t, ns, "agent")
	a.Labels = map[string]string{"poke": "1"}
	if err := env.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, func() error {
		if counter.Count(key) <= passes {
			return fmt.Errorf("no pass after the label edit")
		}
		return nil
	})
	counter.Drain(5 * time.Second)
	if n := statusWrites.Load(); n != writes {
		t.Fatalf("%d status writes by passes that changed nothing", n-writes)
	}
	ctrltest.Eventually(t, wait, unsupportedEventsAre(ns, 1))

	// An edit that changes the list: the message follows, one event more.
	a = mustAgent(t, ns, "agent")
	a.Spec.Media = nil
	if err := env.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, conditionSays(ns, "agent", omniav1.ConditionUnsupported, metav1.ConditionTrue, omniav1.ReasonFieldsNotImplemented,
		": spec.evals, spec.facades[].extraEnv"))
	ctrltest.Eventually(t, wait, unsupportedEventsAre(ns, 2))
	ctrltest.Holds(t, agentIs(ns, "agent", omniav1.AgentRuntimePhaseRunning, omniav1.ConditionReady, omniav1.ReasonRuntimeReady))
}

// unsupportedEventsAre checks that the agent has n FieldsNotImplemented
// Warning events, counting each event's repeats.
func unsupportedEventsAre(ns string, n int) func() error {
	return func() error {
		var evs eventsv1.EventList
		if err := env.Client.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		got := 0
		for _, e := range evs.Items {
			if e.Reason == omniav1.EventFieldsNotImplemented && e.Regarding.Name == "agent" && e.Type == corev1.EventTypeWarning {
				got++
				if e.Series != nil {
					got += int(e.Series.Count) - 1
				}
			}
		}
		if got != n {
			return fmt.Errorf("%d FieldsNotImplemented events, want %d", got, n)
		}
		return nil
	}
}
