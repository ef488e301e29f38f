package toolregistry

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

const wait = 30 * time.Second

func start(t *testing.T) *ctrltest.Counter {
	t.Helper()
	counter := &ctrltest.Counter{}
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		r := &Reconciler{Client: mgr.GetClient()}
		counter.Inner = r
		return r.SetupWithManager(mgr, counter)
	})
	return counter
}

// create creates tr in ns, named "tools" unless it has a name.
func create(t *testing.T, ns string, tr *omniav1.ToolRegistry) {
	t.Helper()
	tr.Namespace = ns
	if tr.Name == "" {
		tr.Name = "tools"
	}
	ctrltest.Create(t, env, tr)
}

func get(ns string) (*omniav1.ToolRegistry, error) {
	tr := &omniav1.ToolRegistry{}
	return tr, env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "tools"}, tr)
}

func phaseIs(ns string, want omniav1.ToolRegistryPhase) func() error {
	return func() error {
		tr, err := get(ns)
		if err != nil {
			return err
		}
		if tr.Status.Phase != want {
			return fmt.Errorf("phase %q, want %q (%+v)", tr.Status.Phase, want, tr.Status.Conditions)
		}
		return nil
	}
}

func condIs(ns, typ string, status metav1.ConditionStatus, reason string) func() error {
	return func() error {
		tr, err := get(ns)
		if err != nil {
			return err
		}
		return ctrltest.ConditionIs(tr.Status.Conditions, typ, status, reason)
	}
}

// TestReadyAndNoStatusLoop: http and mcp handlers give Ready with the
// explicit tool and a placeholder; the controller's own status write does
// not re-enqueue the registry (counted passes stay put).
func TestReadyAndNoStatusLoop(t *testing.T) {
	ns := env.Namespace(t)
	counter := start(t)
	create(t, ns, registry(false, httpH("weather", "http://weather.local/api"), mcpH("fs")))
	ctrltest.Eventually(t, wait, phaseIs(ns, omniav1.ToolRegistryPhaseReady))
	tr, _ := get(ns)
	if tr.Status.DiscoveredToolsCount != 2 || tr.Status.DiscoveredTools[0].Name != "weather" || tr.Status.DiscoveredTools[1].Name != "fs" {
		t.Fatalf("discoveredTools %+v", tr.Status.DiscoveredTools)
	}
	key := types.NamespacedName{Namespace: ns, Name: "tools"}
	n := counter.Count(key)
	time.Sleep(3 * time.Second)
	if got := counter.Count(key); got != n || n != 1 {
		t.Fatalf("reconciles: %d after convergence, %d three seconds later; want exactly 1 (status writes must not re-enqueue)", n, got)
	}
	// A metadata-only change is not a spec change either.
	tr.Labels = map[string]string{"x": "y"}
	if err := env.Client.Update(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if got := counter.Count(key); got != 1 {
		t.Fatalf("a label change caused %d reconciles", got-1)
	}
}

// TestInvalidHandlerThenFix: an unknown platform service fails the registry;
// the spec edit that fixes it is a watch event that recovers it.
func TestInvalidHandlerThenFix(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	create(t, ns, registry(false, omniav1.HandlerDefinition{Name: "plat", Type: omniav1.HandlerTypePlatform,
		PlatformConfig: &omniav1.PlatformConfig{Service: "nope"}}))
	ctrltest.Eventually(t, wait, phaseIs(ns, omniav1.ToolRegistryPhaseFailed))
	ctrltest.Eventually(t, wait, condIs(ns, omniav1.ConditionHandlersValid, metav1.ConditionFalse, omniav1.ReasonValidationFailed))
	tr, _ := get(ns)
	tr.Spec.Handlers[0].PlatformConfig.Service = "agents"
	if err := env.Client.Update(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, phaseIs(ns, omniav1.ToolRegistryPhaseReady))
	tr, _ = get(ns)
	if int(tr.Status.DiscoveredToolsCount) != len(DefaultPlatformCatalog["agents"]) {
		t.Fatalf("platform tools %+v", tr.Status.DiscoveredTools)
	}
}

// TestProbing: one listening and one closed local port give Degraded; the
// reconcile asks to come back at the probe interval; closing the listener
// turns the registry Failed on the next timed pass, with no spec change.
func TestProbing(t *testing.T) {
	ns := env.Namespace(t)
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = up.Close() }()
	down, _ := net.Listen("tcp", "127.0.0.1:0")
	downAddr := down.Addr().String()
	_ = down.Close()

	tr := registry(true, httpH("up", "http://"+up.Addr().String()), httpH("down", "http://"+downAddr))
	tr.Spec.Probe.Interval = &metav1.Duration{Duration: MinProbeInterval}
	create(t, ns, tr)

	c := ctrltest.StartManager(t, env) // cache only: reconcile by hand to see the result
	r := &Reconciler{Client: c}
	var res reconcile.Result
	ctrltest.Eventually(t, wait, func() error {
		var err error
		res, err = r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "tools"}})
		if err != nil {
			return err
		}
		return phaseIs(ns, omniav1.ToolRegistryPhaseDegraded)()
	})
	if res.RequeueAfter != MinProbeInterval {
		t.Fatalf("requeueAfter %s, want the %s probe interval", res.RequeueAfter, MinProbeInterval)
	}

	start(t)
	_ = up.Close()
	ctrltest.Eventually(t, wait, phaseIs(ns, omniav1.ToolRegistryPhaseFailed))
}

// TestPolicyAndSandboxWatches: creating and readying the ToolPolicy,
// SandboxClass and Connection a registry depends on flips its conditions
// through the watches alone.
func TestPolicyAndSandboxWatches(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	ctx := context.Background()
	h := mcpH("fs")
	h.Sandbox = &omniav1.HandlerSandbox{ClassName: "gvisor", ConnectionRefs: []omniav1.LocalObjectReference{{Name: "github"}}}
	create(t, ns, registry(false, h))
	ctrltest.Eventually(t, wait, condIs(ns, omniav1.ConditionPolicyBound, metav1.ConditionFalse, omniav1.ReasonNoPolicy))
	ctrltest.Eventually(t, wait, condIs(ns, omniav1.ConditionSandboxesValid, metav1.ConditionFalse, omniav1.ReasonSandboxClassNotFound))
	ctrltest.Eventually(t, wait, condIs(ns, omniav1.ConditionSandboxConnectionsValid, metav1.ConditionFalse, omniav1.ReasonConnectionNotFound))

	pol := &omniav1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pol", Namespace: ns}, Spec: omniav1.ToolPolicySpec{
		Selector: omniav1.ToolPolicySelector{Registry: "tools"},
		Rules:    []omniav1.ToolPolicyRule{{Name: "r", Deny: omniav1.ToolPolicyDeny{CEL: "false", Message: "no"}}}}}
	ctrltest.Create(t, env, pol)
	ctrltest.Eventually(t, wait, condIs(ns, omniav1.ConditionPolicyBound, metav1.ConditionFalse, omniav1.ReasonPolicyNotCompiled))
	// No ToolPolicy controller runs here; the test plays its part.
	pol.Status.Phase = omniav1.ToolPolicyPhaseActive
	meta.SetStatusCondition(&pol.Status.Conditions, metav1.Condition{Type: omniav1.ConditionCompiled, Status: metav1.ConditionTrue, Reason: omniav1.ReasonPolicyCompiled, ObservedGeneration: pol.Generation})
	if err := env.Client.Status().Update(ctx, pol); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, condIs(ns, omniav1.ConditionPolicyBound, metav1.ConditionTrue, omniav1.ReasonPolicyBound))

	// becomesReady creates obj, which cond then judges not ready
	// (notReady), marks it Ready as its own controller, not running here,
	// would (markReady and a status write), and waits for cond to follow
	// (ready).
	becomesReady := func(obj client.Object, markReady func(), cond, notReady, ready string) {
		t.Helper()
		ctrltest.Create(t, env, obj)
		ctrltest.Eventually(t, wait, condIs(ns, cond, metav1.ConditionFalse, notReady))
		markReady()
		if err := env.Client.Status().Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
		ctrltest.Eventually(t, wait, condIs(ns, cond, metav1.ConditionTrue, ready))
	}
	class := &omniav1.SandboxClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor", Namespace: ns}, Spec: omniav1.SandboxClassSpec{
		Image: "sandbox:1", AllowedConnections: []omniav1.LocalObjectReference{{Name: "github"}}}}
	becomesReady(class, func() { class.Status.Phase = omniav1.SandboxClassPhaseReady },
		omniav1.ConditionSandboxesValid, omniav1.ReasonSandboxClassNotReady, omniav1.ReasonSandboxesValid)
	conn := &omniav1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "github", Namespace: ns}, Spec: omniav1.ConnectionSpec{URL: "https://api.github.com"}}
	becomesReady(conn, func() { conn.Status.Phase = omniav1.ConnectionPhaseReady },
		omniav1.ConditionSandboxConnectionsValid, omniav1.ReasonConnectionNotReady, omniav1.ReasonConnectionsValid)
}
