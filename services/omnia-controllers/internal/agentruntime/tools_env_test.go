package agentruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// toolsCM reads the agent's tools ConfigMap; nil when it does not exist.
// toolsJSONHas is a condition: the tools ConfigMap of the agent "agent" of
// ns is there and its tools.json contains part.
func toolsJSONHas(t *testing.T, ns, part string) func() error {
	return func() error {
		if c := toolsCM(t, ns, "agent"); c == nil || !strings.Contains(c.Data[omniav1.ToolsJSONKey], part) {
			return fmt.Errorf("no tools.json with %s yet", part)
		}
		return nil
	}
}

// createPolicy creates the ToolPolicy name in ns, over the registry
// "tools" with a rule of each name of rules (policy), and returns it.
func createPolicy(t *testing.T, ns, name string, rules ...string) *omniav1.ToolPolicy {
	t.Helper()
	p := policy(name, rules...)
	p.Namespace = ns
	ctrltest.Create(t, env, &p)
	return &p
}

func toolsCM(t *testing.T, ns, agent string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: ToolsConfigMapName(agent)}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// startWeatherAgent starts every controller (startAll) and creates, in a
// namespace of the test's own, the agent "agent" with the ToolRegistry
// "tools" of one http handler, weather, described desc; it returns the
// namespace and the AgentRuntime passes.
func startWeatherAgent(t *testing.T, desc string) (string, *ctrltest.Counter) {
	t.Helper()
	ns := env.Namespace(t)
	counter := startAll(t)
	createWithInputs(t, ns, toolsRegistry(ns, httpHandler("weather", desc)), toolsAgent(ns))
	return ns, counter
}

// TestToolsConfigMapReachesThePod, against a real API server: the agent's
// tools ConfigMap is created, owned and mounted; a handler change rolls
// the pods once; registry status churn rolls nothing and rewrites
// nothing; a deleted ConfigMap is recreated through its watch; a deleted
// registry removes the ConfigMap and the mount.
func TestToolsConfigMapReachesThePod(t *testing.T) {
	ns, counter := startWeatherAgent(t, "Weather by city")
	ctx := context.Background()
	key := types.NamespacedName{Namespace: ns, Name: "agent"}

	// 1. Created, owned, mounted.
	ctrltest.Eventually(t, wait, func() error {
		c := toolsCM(t, ns, "agent")
		if c == nil {
			return errors.New("no tools ConfigMap yet")
		}
		if o := metav1.GetControllerOf(c); o == nil || o.Kind != "AgentRuntime" || o.Name != "agent" {
			return fmt.Errorf("controller %+v", o)
		}
		if !strings.Contains(c.Data[omniav1.ToolsJSONKey], `"description":"Weather by city"`) {
			return fmt.Errorf("tools.json %s", c.Data[omniav1.ToolsJSONKey])
		}
		dep := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, key, dep); err != nil {
			return err
		}
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == ToolsVolumeName && v.Projected != nil && v.Projected.Sources[0].ConfigMap.Name == "agent-tools" {
				return replicaSetsAre(t, ns, "agent", 1)()
			}
		}
		return errors.New("the Deployment does not mount the tools volume")
	})
	cmRV := toolsCM(t, ns, "agent").ResourceVersion

	// 2. Status churn only: no new ReplicaSet, no ConfigMap write.
	before := counter.Count(key)
	for i := range 3 {
		tr := ctrltest.Get[omniav1.ToolRegistry](t, env, types.NamespacedName{Namespace: ns, Name: "tools"})
		now := metav1.NewTime(time.Now().Add(time.Duration(i) * time.Minute).Truncate(time.Second))
		tr.Status = omniav1.ToolRegistryStatus{Phase: omniav1.ToolRegistryPhaseReady, ObservedGeneration: tr.Generation, LastDiscoveryTime: &now,
			DiscoveredToolsCount: 1, DiscoveredTools: []omniav1.DiscoveredTool{{Name: "weather_tool", HandlerName: "weather",
				Status: omniav1.ToolStatusAvailable, LastChecked: &now}},
			Conditions: []metav1.Condition{{Type: omniav1.ConditionToolsDiscovered, Status: metav1.ConditionTrue, Reason: "ToolsDiscovered",
				Message: fmt.Sprintf("probe round %d", i), LastTransitionTime: now}}}
		if err := env.Client.Status().Update(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	ctrltest.Eventually(t, wait, func() error {
		if n := counter.Count(key); n < before+1 {
			return errors.New("the status churn has not reached the agent yet")
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	ctrltest.Holds(t, replicaSetsAre(t, ns, "agent", 1)) // after registry status churn
	if rv := toolsCM(t, ns, "agent").ResourceVersion; rv != cmRV {
		t.Fatalf("the tools ConfigMap was rewritten on status churn (%s -> %s)", cmRV, rv)
	}

	// 3. A handler change: one new ReplicaSet and the new tools.json.
	tr := ctrltest.Get[omniav1.ToolRegistry](t, env, types.NamespacedName{Namespace: ns, Name: "tools"})
	tr.Spec.Handlers[0].Tool.Description = "Weather and forecast"
	if err := env.Client.Update(ctx, tr); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, func() error {
		if !strings.Contains(toolsCM(t, ns, "agent").Data[omniav1.ToolsJSONKey], "Weather and forecast") {
			return errors.New("tools.json not updated yet")
		}
		return replicaSetsAre(t, ns, "agent", 2)()
	})
	time.Sleep(2 * time.Second)
	ctrltest.Holds(t, replicaSetsAre(t, ns, "agent", 2)) // after one handler change

	// 4. Deleted by someone else: recreated through the owned watch.
	if err := env.Client.Delete(ctx, toolsCM(t, ns, "agent")); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, func() error {
		if toolsCM(t, ns, "agent") == nil {
			return errors.New("not recreated yet")
		}
		return nil
	})

	// 5. The registry deleted: ToolRegistryReady=False, no ConfigMap, no
	// tools volume.
	if err := env.Client.Delete(ctx, tr); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, func() error {
		if toolsCM(t, ns, "agent") != nil {
			return errors.New("the stale tools ConfigMap is still there")
		}
		a := mustAgent(t, ns, "agent")
		if err := ctrltest.PhaseReason(a.Status.Phase, a.Status.Conditions, a.Status.Phase, omniav1.ConditionToolRegistryReady, omniav1.ReasonToolRegistryNotFound); err != nil {
			return err
		}
		dep := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, key, dep); err != nil {
			return err
		}
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == ToolsVolumeName {
				return errors.New("the Deployment still mounts the tools volume")
			}
		}
		return nil
	})
}

// TestToolPolicyAndSecretWatches: a ToolPolicy that selects the registry
// reaches the agent's tools.json through the ToolPolicy watch; a handler
// Secret without the credentials label is not mounted
// (ToolSecretsReady=False), and labelling it reaches the agent through
// the Secret watch, which then mounts it.
func TestToolPolicyAndSecretWatches(t *testing.T) {
	ns := env.Namespace(t)
	startAll(t)
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wx-token", Namespace: ns}, Data: map[string][]byte{"token": []byte("v")}}
	createWithInputs(t, ns, sec, toolsRegistry(ns, bearer(httpHandler("weather", "w"), "wx-token", nil), mcpHandler("docs")), toolsAgent(ns))
	ctrltest.Eventually(t, wait, func() error {
		a := mustAgent(t, ns, "agent")
		if err := ctrltest.PhaseReason(a.Status.Phase, a.Status.Conditions, a.Status.Phase, omniav1.ConditionToolSecretsReady, omniav1.ReasonToolSecretNotUsable); err != nil {
			return err
		}
		if c := toolsCM(t, ns, "agent"); c == nil || strings.Contains(c.Data[omniav1.ToolsJSONKey], `"weather"`) {
			return errors.New("want a tools.json without the weather handler")
		}
		return nil
	})

	createPolicy(t, ns, "no-prod", "no-prod")
	ctrltest.Eventually(t, wait, toolsJSONHas(t, ns, `"name":"no-prod"`))

	sec.Labels = map[string]string{omniav1.LabelType: omniav1.LabelTypeCredentials}
	if err := env.Client.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, func() error {
		a := mustAgent(t, ns, "agent")
		if err := ctrltest.PhaseReason(a.Status.Phase, a.Status.Conditions, a.Status.Phase, omniav1.ConditionToolSecretsReady, omniav1.ReasonToolSecretsMounted); err != nil {
			return err
		}
		dep := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "agent"}, dep); err != nil {
			return err
		}
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == ToolsVolumeName && len(v.Projected.Sources) == 2 && v.Projected.Sources[1].Secret.Name == "wx-token" {
				return nil
			}
		}
		return errors.New("the Secret is not projected yet")
	})
}

// TestToolPolicyWatchAloneUpdatesTools: once the agent's passes have
// drained (its first rollout's echoes worked off) and with no ToolRegistry
// controller running (whose status writes would bring the pass through
// the registry watch), a ToolPolicy that selects the agent's registry is
// created and then edited: only the ToolPolicy watch can bring the passes
// that put it, then its new rule, into <agent>-tools. A policy of another
// registry brings no pass.
func TestToolPolicyWatchAloneUpdatesTools(t *testing.T) {
	ns, counter := startWeatherAgent(t, "w")
	ctx := context.Background()
	key := types.NamespacedName{Namespace: ns, Name: "agent"}
	ctrltest.Eventually(t, wait, toolsJSONHas(t, ns, `"policies":[]`))
	counter.Drain(2 * time.Second)

	// A policy of another registry: mapped to no agent.
	other := policy("elsewhere", "r")
	other.ObjectMeta = metav1.ObjectMeta{Name: "elsewhere", Namespace: ns}
	other.Spec.Selector.Registry = "other-tools"
	before := counter.Count(key)
	ctrltest.Create(t, env, &other)
	counter.Drain(2 * time.Second)
	if n := counter.Count(key) - before; n != 0 {
		t.Fatalf("a policy of another registry brought %d pass(es)", n)
	}

	pol := createPolicy(t, ns, "no-prod", "no-prod")
	ctrltest.Eventually(t, wait, toolsJSONHas(t, ns, `"name":"no-prod"`))
	if strings.Contains(toolsCM(t, ns, "agent").Data[omniav1.ToolsJSONKey], "elsewhere") {
		t.Fatal("a policy of another registry is in tools.json")
	}

	// An edit of the policy's rules.
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "no-prod"}, pol); err != nil {
		t.Fatal(err)
	}
	pol.Spec.Rules = append(pol.Spec.Rules, omniav1.ToolPolicyRule{Name: "no-weekends", Deny: omniav1.ToolPolicyDeny{CEL: "false", Message: "not today"}})
	if err := env.Client.Update(ctx, pol); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, toolsJSONHas(t, ns, `"name":"no-weekends"`))
}
