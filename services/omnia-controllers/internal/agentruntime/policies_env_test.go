package agentruntime

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// TestSessionPolicyReachesPodsThroughWatch: the policy watch alone brings
// the policy in force to a settled agent's pods. Before each change the
// passes are drained, so only the policy's own event can bring the next
// one: a SessionRetentionPolicy created after the agent puts its TTLs into
// the pod template, a TTL edit rolls the pods (a new ReplicaSet), a
// status write on the policy enqueues nothing and rolls nothing, a label
// edit enqueues the agent, a MemoryPolicy created reaches the pods too,
// and deleting the session policy takes its env off again.
func TestSessionPolicyReachesPodsThroughWatch(t *testing.T) {
	ns := env.Namespace(t)
	passes := startAll(t)
	ctx := context.Background()
	createWithInputs(t, ns,
		newAgent(ns, "agent", func(a *omniav1.AgentRuntime) { a.Labels = map[string]string{"team": "a"} }))
	key := types.NamespacedName{Namespace: ns, Name: "agent"}
	template := func(ttl string) func() error { // ttl "": no policy env
		return ctrltest.ObjectIs(env.Client, key, func(d *appsv1.Deployment) error {
			name, named := envValue(d.Spec.Template, EnvSessionRetentionPolicy)
			got, set := envValue(d.Spec.Template, EnvSessionTTL)
			transcript, _ := envValue(d.Spec.Template, EnvTranscriptTTL)
			switch {
			case ttl == "" && (set || named):
				return fmt.Errorf("%s=%q %s=%q still set", EnvSessionRetentionPolicy, name, EnvSessionTTL, got)
			case ttl != "" && (name != "keep" || got != ttl || transcript != ttl):
				return fmt.Errorf("%s=%q %s=%q %s=%q, want keep %s %s", EnvSessionRetentionPolicy, name, EnvSessionTTL, got, EnvTranscriptTTL, transcript, ttl, ttl)
			}
			return nil
		})
	}
	memory := func(spec string) func() error {
		return ctrltest.ObjectIs(env.Client, key, func(d *appsv1.Deployment) error {
			name, _ := envValue(d.Spec.Template, EnvMemoryPolicy)
			got, _ := envValue(d.Spec.Template, EnvMemoryPolicyJSON)
			if name != "mem" || got != spec {
				return fmt.Errorf("%s=%q %s=%q, want mem %s", EnvMemoryPolicy, name, EnvMemoryPolicyJSON, got, spec)
			}
			return nil
		})
	}
	ctrltest.Eventually(t, wait, template(""))
	ctrltest.Eventually(t, wait, replicaSetsAre(t, ns, "agent", 1))

	steps := []struct {
		name    string
		change  func(t *testing.T) error
		enqueue bool
		after   []func() error
	}{
		{"a policy created after the agent reaches its pods", func(t *testing.T) error {
			return env.Client.Create(ctx, &omniav1.SessionRetentionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "keep", Namespace: ns},
				Spec: omniav1.SessionRetentionPolicySpec{AgentSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
					SessionTTL: metav1.Duration{Duration: time.Hour}}})
		}, true, []func() error{template("1h0m0s"), replicaSetsAre(t, ns, "agent", 2)}},
		{"a TTL edit rolls the pods", func(t *testing.T) error {
			update(t, &omniav1.SessionRetentionPolicy{}, ns, "keep", func(o client.Object) {
				o.(*omniav1.SessionRetentionPolicy).Spec.SessionTTL.Duration = 2 * time.Hour
			})
			return nil
		}, true, []func() error{template("2h0m0s"), replicaSetsAre(t, ns, "agent", 3)}},
		{"a status write on the policy enqueues nothing", func(t *testing.T) error {
			p := &omniav1.SessionRetentionPolicy{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "keep"}, p); err != nil {
				return err
			}
			p.Status = omniav1.AgentPolicyStatus{AgentCount: 1, AppliesTo: []string{"agent"}, ObservedGeneration: p.Generation,
				Conditions: []metav1.Condition{{Type: omniav1.ConditionReady, Status: metav1.ConditionTrue, Reason: omniav1.ReasonPolicyValid,
					Message: "played", LastTransitionTime: metav1.Now()}}}
			return env.Client.Status().Update(ctx, p)
		}, false, []func() error{template("2h0m0s"), replicaSetsAre(t, ns, "agent", 3)}},
		{"a label edit on the policy enqueues the agent", func(t *testing.T) error {
			update(t, &omniav1.SessionRetentionPolicy{}, ns, "keep", func(o client.Object) { o.SetLabels(map[string]string{"owner": "x"}) })
			return nil
		}, true, []func() error{template("2h0m0s"), replicaSetsAre(t, ns, "agent", 3)}},
		{"a MemoryPolicy created after the agent reaches its pods", func(t *testing.T) error {
			return env.Client.Create(ctx, &omniav1.MemoryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "mem", Namespace: ns},
				Spec: omniav1.MemoryPolicySpec{MaxEntriesPerUser: ptr(int32(10))}})
		}, true, []func() error{memory(`{"maxEntriesPerUser":10}`), replicaSetsAre(t, ns, "agent", 4)}},
		{"deleting the policy takes its env off", func(t *testing.T) error {
			return env.Client.Delete(ctx, &omniav1.SessionRetentionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "keep", Namespace: ns}})
		}, true, []func() error{template(""), memory(`{"maxEntriesPerUser":10}`), replicaSetsAre(t, ns, "agent", 5)}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			// The echoes of earlier writes (the agent's status, the
			// Deployment's rollout) are worked off first: what runs
			// after comes from this step's change.
			passes.Drain(time.Second)
			before := passes.Count(key)
			if err := st.change(t); err != nil {
				t.Fatal(err)
			}
			if st.enqueue {
				ctrltest.Eventually(t, wait, func() error {
					if passes.Count(key) == before {
						return fmt.Errorf("the agent was not enqueued")
					}
					return nil
				})
				for _, c := range st.after {
					ctrltest.Eventually(t, wait, c)
				}
				return
			}
			ctrltest.Consistently(t, 2*time.Second, func() error {
				if n := passes.Count(key); n != before {
					return fmt.Errorf("the agent was enqueued (%d passes, %d before)", n, before)
				}
				return nil
			})
			ctrltest.Holds(t, st.after...)
		})
	}
}
