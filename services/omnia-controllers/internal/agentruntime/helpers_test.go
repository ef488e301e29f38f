package agentruntime

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/promptpack"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/provider"
)

const wait = 30 * time.Second

const validPack = ctrltest.ValidPack

var testConfig = Config{RuntimeImage: "agentplane/stand-in-runtime:test", RuntimeCommand: []string{"/runtime"},
	FacadeImage: "agentplane/stand-in-facade:test", FacadeCommand: []string{"/facade"}}

// startAll runs the PromptPack, Provider and AgentRuntime controllers
// together, as the binary does, counting AgentRuntime passes.
func startAll(t *testing.T) *ctrltest.Counter {
	t.Helper()
	return startAllWith(t, testConfig)
}

// startAllWith is startAll with the given operator configuration.
func startAllWith(t *testing.T, cfg Config) *ctrltest.Counter {
	t.Helper()
	counter := &ctrltest.Counter{}
	startStack(t, func(_ ctrl.Manager, r *Reconciler) reconcile.Reconciler {
		r.Config = cfg
		counter.Inner = r
		return counter
	})
	return counter
}

// startStack runs the PromptPack, Provider and AgentRuntime controllers
// together, as the binary does; every start helper of these tests is one
// wiring of it. The AgentRuntime reconciler has the manager's client and
// an event recorder, and testConfig; wire, when not nil, changes it and
// returns what SetupWithManager calls in its place (nil: the reconciler).
func startStack(t *testing.T, wire func(mgr ctrl.Manager, r *Reconciler) reconcile.Reconciler) {
	t.Helper()
	v, err := promptpack.NewSchemaValidator()
	if err != nil {
		t.Fatal(err)
	}
	ctrltest.StartManager(t, env,
		func(mgr ctrl.Manager) error {
			return (&promptpack.Reconciler{Client: mgr.GetClient(), Validator: v}).SetupWithManager(mgr, nil)
		},
		func(mgr ctrl.Manager) error {
			return (&provider.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, nil)
		},
		func(mgr ctrl.Manager) error {
			r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("agentruntime-controller"), Config: testConfig}
			var rec reconcile.Reconciler
			if wire != nil {
				rec = wire(mgr, r)
			}
			return r.SetupWithManager(mgr, rec)
		})
}

// createWithInputs creates in ns what most agents of these tests read,
// the pack support-v1 (validPack as version 1.0.0, with its ConfigMap)
// and the mock Provider llm, and then objs, in that order.
func createWithInputs(t *testing.T, ns string, objs ...client.Object) {
	t.Helper()
	cm, pack := packObjects(ns, "support-v1", "1.0.0", validPack)
	ctrltest.Create(t, env, append([]client.Object{cm, pack, mockProvider(ns, "llm")}, objs...)...)
}

// toolsRegistry is the ToolRegistry "tools" of ns with handlers.
func toolsRegistry(ns string, handlers ...omniav1.HandlerDefinition) *omniav1.ToolRegistry {
	return &omniav1.ToolRegistry{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: ns},
		Spec: omniav1.ToolRegistrySpec{Handlers: handlers}}
}

// toolsAgent is the agent "agent" of ns with the ToolRegistry "tools".
func toolsAgent(ns string) *omniav1.AgentRuntime {
	return newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.ToolRegistryRef = &omniav1.ToolRegistryRef{Name: "tools"}
	})
}

// packObjects returns a ConfigMap and a PromptPack version of "support".
func packObjects(ns, name, version, content string) (*corev1.ConfigMap, *omniav1.PromptPack) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{omniav1.PackJSONKey: content}}
	p := &omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: omniav1.PromptPackSpec{
		PackName: "support", Version: version,
		Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: name}}}}
	return cm, p
}

func mockProvider(ns, name string, caps ...omniav1.ProviderCapability) *omniav1.Provider {
	return &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeMock, Capabilities: caps}}
}

func newAgent(ns, name string, mut func(*omniav1.AgentRuntime)) *omniav1.AgentRuntime {
	a := &omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: omniav1.AgentRuntimeSpec{
		PromptPackRef: omniav1.PromptPackRef{Name: "support"},
		Facades:       []omniav1.FacadeConfig{{Type: omniav1.FacadeTypeWebSocket}},
		Providers:     []omniav1.NamedProviderRef{{Name: "default", ProviderRef: omniav1.ProviderRef{Name: "llm"}}},
	}}
	if mut != nil {
		mut(a)
	}
	return a
}

// getAgent reads an AgentRuntime through the API server.
//
//nolint:contextcheck // test helper: it makes its own context.Background(), the only context the tests here have; callers have nothing cancellable to pass
func getAgent(ns, name string) (*omniav1.AgentRuntime, error) {
	a := &omniav1.AgentRuntime{}
	return a, env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, a)
}

func agentIs(ns, name string, phase omniav1.AgentRuntimePhase, condType, reason string) func() error {
	return func() error {
		a, err := getAgent(ns, name)
		if err != nil {
			return err
		}
		return ctrltest.PhaseReason(a.Status.Phase, a.Status.Conditions, phase, condType, reason)
	}
}

func replicaSets(t *testing.T, ns, agent string) []appsv1.ReplicaSet {
	t.Helper()
	var rss appsv1.ReplicaSetList
	if err := env.Client.List(context.Background(), &rss, client.InNamespace(ns), client.MatchingLabels{LabelInstance: agent}); err != nil {
		t.Fatal(err)
	}
	return rss.Items
}

// replicaSetsAre is a condition: agent's Deployment in ns has made n
// ReplicaSets, one per pod template it ran.
func replicaSetsAre(t *testing.T, ns, agent string, n int) func() error {
	return func() error {
		if got := len(replicaSets(t, ns, agent)); got != n {
			return fmt.Errorf("%d ReplicaSets, want %d", got, n)
		}
		return nil
	}
}

// deletedAndRecreated deletes obj through the API server and waits until
// the object of its key is back as a new object (another UID), as an
// owned object's watch must bring it back; obj is then the new one.
//
//nolint:contextcheck // test helper: it makes its own context.Background(), the only context the tests here have; callers have nothing cancellable to pass
func deletedAndRecreated(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	key, old := client.ObjectKeyFromObject(obj), obj.GetUID()
	if err := env.Client.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, func() error {
		if err := env.Client.Get(ctx, key, obj); err != nil {
			return err
		}
		if obj.GetUID() == old {
			return fmt.Errorf("the deleted %T is still there", obj)
		}
		return nil
	})
}

func pods(t *testing.T, ns, agent string) []corev1.Pod {
	t.Helper()
	var ps corev1.PodList
	if err := env.Client.List(context.Background(), &ps, client.InNamespace(ns), client.MatchingLabels{LabelInstance: agent}); err != nil {
		t.Fatal(err)
	}
	return ps.Items
}

// setPodReady writes into p the status a kubelet reports once the
// pod's containers pass the readiness probe.
func setPodReady(p *corev1.Pod, now metav1.Time) {
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP, p.Status.HostIP = "127.0.0.1", "127.0.0.1"
	p.Status.StartTime = &now
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
}

// markPodsReady plays the kubelet: no kubelet runs in this control plane
// yet (tools/localnode will), so the test writes the agent pods' status
// through the API as a kubelet would once their containers pass the
// readiness probe. The ReplicaSet and Deployment controllers then count
// them ready as they would in a cluster.
func markPodsReady(t *testing.T, ns, agent string) {
	t.Helper()
	ctrltest.Eventually(t, wait, func() error {
		ps := pods(t, ns, agent)
		if len(ps) == 0 {
			return fmt.Errorf("no pods for %s yet", agent)
		}
		now := metav1.Now()
		for i := range ps {
			p := &ps[i]
			setPodReady(p, now)
			if err := env.Client.Status().Update(context.Background(), p); err != nil {
				return err
			}
		}
		return nil
	})
}
