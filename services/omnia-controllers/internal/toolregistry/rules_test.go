package toolregistry

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// TestTransientAPIFailureIsReturned: when a call to the API server fails,
// the reconciler returns the error, for each read and the status write of
// a ToolRegistry pass; a successful pass without probing asks for no
// timer; and the controller reads handler definitions, never Services:
// the only kinds a pass reads are the registry and the ToolPolicies,
// SandboxClasses and Connections its conditions are judged against.
func TestTransientAPIFailureIsReturned(t *testing.T) {
	ns, ctx, c := ctrltest.ByHand(t, env) // cache and indexes only
	allowed := map[string]bool{
		ctrltest.Call("get", &omniav1.ToolRegistry{}):    true,
		ctrltest.Call("list", &omniav1.ToolPolicyList{}): true,
		ctrltest.Call("get", &omniav1.SandboxClass{}):    true,
		ctrltest.Call("get", &omniav1.Connection{}):      true,
		ctrltest.Call("status", &omniav1.ToolRegistry{}): true,
	}
	cases := []ctrltest.Failure{
		{Name: "listing the ToolPolicies fails", Fail: ctrltest.Call("list", &omniav1.ToolPolicyList{})},
		{Name: "reading a SandboxClass fails", Fail: ctrltest.Call("get", &omniav1.SandboxClass{})},
		{Name: "reading a Connection fails", Fail: ctrltest.Call("get", &omniav1.Connection{})},
		{Name: "writing the status fails", Fail: ctrltest.Call("status", &omniav1.ToolRegistry{})},
		{Name: "nothing fails: success is not requeued"},
	}
	newR := func(c client.Client) reconcile.Reconciler { return &Reconciler{Client: c} }
	ctrltest.CheckFailuresReturned(t, c, newR, cases, func(t *testing.T, i int) reconcile.Request {
		h := mcpH("fs") // sandboxes are for stdio mcp handlers
		h.Sandbox = &omniav1.HandlerSandbox{ClassName: "gvisor", ConnectionRefs: []omniav1.LocalObjectReference{{Name: "github"}}}
		tr := registry(false, h)
		tr.Name = fmt.Sprintf("tools-%d", i)
		create(t, ns, tr)
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: tr.Name}}
		ctrltest.Eventually(t, wait, func() error { return c.Get(ctx, req.NamespacedName, &omniav1.ToolRegistry{}) })
		return req
	}, func(t *testing.T, req reconcile.Request) {
		f := &ctrltest.Failing{Client: c}
		res, err := newR(f).Reconcile(ctx, req)
		if err != nil || res != (reconcile.Result{}) {
			t.Fatalf("result %+v err %v; want success with no timer (probing is off)", res, err)
		}
		for _, call := range f.Calls() {
			if !allowed[call] {
				t.Errorf("a pass made %q; discovery reads the spec, not the cluster", call)
			}
		}
		got := ctrltest.Get[omniav1.ToolRegistry](t, env, req.NamespacedName)
		if got.Status.Phase != omniav1.ToolRegistryPhaseReady || got.Status.DiscoveredToolsCount != 1 {
			t.Fatalf("status %+v", got.Status)
		}
	})
}

// TestPolicyBoundFollowsTheToolPolicyWatch checks that the ToolPolicy
// watch reaches every registry whose PolicyBound a policy change decides,
// including the one a policy's selector moves away from: PolicyBound is
// judged against the ToolPolicies, so the controller watches them too
// (docs/omnia-controllers.md). Registry specs never change here, so only
// the watch can move the conditions.
func TestPolicyBoundFollowsTheToolPolicyWatch(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	ctx := context.Background()
	for _, n := range []string{"a", "b"} {
		tr := registry(false, mcpH("fs"))
		tr.Name = n
		create(t, ns, tr)
	}
	bound := func(name string, status metav1.ConditionStatus, reason string) func() error {
		return ctrltest.ObjectIs(env.Client, types.NamespacedName{Namespace: ns, Name: name}, func(tr *omniav1.ToolRegistry) error {
			if err := ctrltest.ConditionIs(tr.Status.Conditions, omniav1.ConditionPolicyBound, status, reason); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			return nil
		})
	}
	pol := &omniav1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pol", Namespace: ns}, Spec: omniav1.ToolPolicySpec{
		Selector: omniav1.ToolPolicySelector{Registry: "a"},
		Rules:    []omniav1.ToolPolicyRule{{Name: "r", Deny: omniav1.ToolPolicyDeny{CEL: "false", Message: "no"}}}}}
	ctrltest.Create(t, env, pol)
	// No ToolPolicy controller runs here; the test marks it compiled.
	pol.Status.Phase = omniav1.ToolPolicyPhaseActive
	if err := env.Client.Status().Update(ctx, pol); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		change func() error
		a, b   [2]string // PolicyBound status and reason of each registry afterwards
	}{
		{"a compiled policy selecting a binds a only", func() error { return nil },
			[2]string{"True", omniav1.ReasonPolicyBound}, [2]string{"False", omniav1.ReasonNoPolicy}},
		{"moving the selector to b unbinds a and binds b", func() error {
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pol"}, pol); err != nil {
				return err
			}
			pol.Spec.Selector.Registry = "b"
			return env.Client.Update(ctx, pol)
		}, [2]string{"False", omniav1.ReasonNoPolicy}, [2]string{"True", omniav1.ReasonPolicyBound}},
		{"deleting the policy unbinds b", func() error { return env.Client.Delete(ctx, pol) },
			[2]string{"False", omniav1.ReasonNoPolicy}, [2]string{"False", omniav1.ReasonNoPolicy}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.change(); err != nil {
				t.Fatal(err)
			}
			ctrltest.Eventually(t, wait, bound("a", metav1.ConditionStatus(st.a[0]), st.a[1]))
			ctrltest.Eventually(t, wait, bound("b", metav1.ConditionStatus(st.b[0]), st.b[1]))
		})
	}
}
