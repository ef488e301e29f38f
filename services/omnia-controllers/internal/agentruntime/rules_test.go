package agentruntime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/promptpack"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/provider"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/toolregistry"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/workspace"
)

// TestTransientAPIFailureIsReturned: when a call to the API server fails,
// the reconciler returns the error, for every read and write of an
// AgentRuntime pass; and success is not requeued: once the failure
// clears, the same pass succeeds with an empty Result (no timer, no
// requeue), so only controller-runtime's backoff brought it back.
func TestTransientAPIFailureIsReturned(t *testing.T) {
	ns, ctx, c := ctrltest.ByHand(t, env) // cache and indexes only
	cm, pack := packObjects(ns, "support-v1", "1.0.0", validPack)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "llm-key", Namespace: ns, Labels: map[string]string{omniav1.LabelType: omniav1.LabelTypeCredentials}}, Data: map[string][]byte{"api-key": []byte("k")}}
	prov := mockProvider(ns, "llm")
	prov.Spec.Credential = &omniav1.CredentialConfig{SecretRef: &omniav1.SecretKeyRef{Name: "llm-key"}}
	tr := &omniav1.ToolRegistry{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: ns}, Spec: omniav1.ToolRegistrySpec{Handlers: []omniav1.HandlerDefinition{{
		Name: "ask", Type: omniav1.HandlerTypeClient, Tool: &omniav1.ToolDefinition{Name: "ask", Description: "ask the user",
			InputSchema: apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}}}}}}
	ctrltest.Create(t, env, cm, pack, sec, prov, tr)
	setPackPhase(t, pack, omniav1.PromptPackPhaseActive)
	prov.Status.Phase = omniav1.ProviderPhaseReady
	if err := env.Client.Status().Update(ctx, prov); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		fail string // the call that fails; "" for none
	}{
		{"listing the PromptPack versions fails", ctrltest.Call("list", &omniav1.PromptPackList{})},
		{"reading the ToolRegistry fails", ctrltest.Call("get", &omniav1.ToolRegistry{})},
		{"reading the Provider fails", ctrltest.Call("get", &omniav1.Provider{})},
		{"reading the credential Secret fails", ctrltest.Call("get", &corev1.Secret{})},
		{"reading the Deployment fails", ctrltest.Call("get", &appsv1.Deployment{})},
		{"creating the Deployment fails", ctrltest.Call("create", &appsv1.Deployment{})},
		{"writing the status fails", ctrltest.Call("status", &omniav1.AgentRuntime{})},
		{"nothing fails: success is not requeued", ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("agent-%d", i)
			ctrltest.Create(t, env, newAgent(ns, name, func(a *omniav1.AgentRuntime) {
				a.Spec.ToolRegistryRef = &omniav1.ToolRegistryRef{Name: "tools"}
			}))
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
			// The cache lags the creates by a moment: wait until the agent
			// and the Provider's Ready status are visible through it.
			ctrltest.Eventually(t, wait, func() error {
				if err := c.Get(ctx, req.NamespacedName, &omniav1.AgentRuntime{}); err != nil {
					return err
				}
				p := &omniav1.Provider{}
				if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llm"}, p); err != nil {
					return fmt.Errorf("provider not in the cache yet: %w", err)
				}
				if p.Status.Phase != omniav1.ProviderPhaseReady {
					return fmt.Errorf("provider in phase %q in the cache, not Ready yet", p.Status.Phase)
				}
				pp := &omniav1.PromptPack{}
				if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "support-v1"}, pp); err != nil {
					return fmt.Errorf("pack not in the cache yet: %w", err)
				}
				if pp.Status.Phase != omniav1.PromptPackPhaseActive {
					return fmt.Errorf("pack in phase %q in the cache, not Active yet", pp.Status.Phase)
				}
				return nil
			})
			if tc.fail != "" {
				ctrltest.ReturnsInjected(t, ctx, &Reconciler{Client: ctrltest.FailingOn(c, tc.fail), Config: testConfig}, req)
				// A transient failure is not a spec problem: it never
				// marks the AgentRuntime Failed.
				got := ctrltest.Get[omniav1.AgentRuntime](t, env, req.NamespacedName)
				if got.Status.Phase == omniav1.AgentRuntimePhaseFailed {
					t.Errorf("a 503 marked the AgentRuntime Failed: %+v", got.Status.Conditions)
				}
			}
			// The retries controller-runtime would make: after the error,
			// and after each status write of the failed pass (a pass that
			// read a stale cache drops its conflicting write and waits for
			// that event). Every successful pass must ask for nothing.
			ctrltest.Eventually(t, wait, ctrltest.Retried(t, ctx, &Reconciler{Client: c, Config: testConfig}, req,
				agentIs(ns, name, omniav1.AgentRuntimePhasePending, omniav1.ConditionDeploymentReady, omniav1.ReasonDeploymentCreated)))
		})
	}
}

// TestBlockedAgentResumesOnWatchEvent: a pass blocked on a Provider that
// is not Ready, a Provider that lacks a required capability, or a
// PromptPack that failed validation records the reason in a condition and
// returns without an error, and the watch on that object brings the agent
// back when the object changes; a role mismatch waits for an edit to the
// spec. Each case blocks, the fix is one object change, and no timer
// exists to rescue a broken watch.
func TestBlockedAgentResumesOnWatchEvent(t *testing.T) {
	startAll(t)
	ctx := context.Background()
	backend := httptest.NewServer(http.NotFoundHandler()) // any answer counts as reachable
	defer backend.Close()

	cases := []struct {
		name    string
		setup   func(t *testing.T, ns string) // creates the pack, the Provider and the agent
		blocked [3]string                     // phase, condition type, reason while blocked
		fix     func(t *testing.T, ns string)
	}{
		{
			name: "a PromptPack that failed validation: fixing its ConfigMap brings the agent back",
			setup: func(t *testing.T, ns string) {
				cm, pack := packObjects(ns, "support-v1", "1.0.0", `{"id":"x"}`)
				ctrltest.Create(t, env, cm, pack, mockProvider(ns, "llm"), newAgent(ns, "agent", nil))
			},
			blocked: [3]string{string(omniav1.AgentRuntimePhaseFailed), omniav1.ConditionPromptPackReady, omniav1.ReasonPromptPackInvalid},
			fix: func(t *testing.T, ns string) {
				update(t, &corev1.ConfigMap{}, ns, "support-v1", func(o client.Object) { o.(*corev1.ConfigMap).Data[omniav1.PackJSONKey] = validPack })
			},
		},
		{
			name: "a Provider that is not Ready: its becoming Ready brings the agent back",
			setup: func(t *testing.T, ns string) {
				cm, pack := packObjects(ns, "support-v1", "1.0.0", validPack)
				prov := &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns},
					Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeOllama, Model: "llama3", BaseURL: "http://127.0.0.1:1"}}
				ctrltest.Create(t, env, cm, pack, prov, newAgent(ns, "agent", nil))
			},
			blocked: [3]string{string(omniav1.AgentRuntimePhasePending), omniav1.ConditionProviderReady, omniav1.ReasonProviderNotReady},
			fix: func(t *testing.T, ns string) {
				update(t, &omniav1.Provider{}, ns, "llm", func(o client.Object) { o.(*omniav1.Provider).Spec.BaseURL = backend.URL })
			},
		},
		{
			name: "a Provider that lacks a required capability: adding it brings the agent back",
			setup: func(t *testing.T, ns string) {
				cm, pack := packObjects(ns, "support-v1", "1.0.0", validPack)
				ctrltest.Create(t, env, cm, pack, mockProvider(ns, "llm", omniav1.CapabilityText), newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
					a.Spec.Providers[0].RequiredCapabilities = []omniav1.ProviderCapability{omniav1.CapabilityVision}
				}))
			},
			blocked: [3]string{string(omniav1.AgentRuntimePhasePending), omniav1.ConditionProviderReady, omniav1.ReasonCapabilityMismatch},
			fix: func(t *testing.T, ns string) {
				update(t, &omniav1.Provider{}, ns, "llm", func(o client.Object) {
					p := o.(*omniav1.Provider)
					p.Spec.Capabilities = append(p.Spec.Capabilities, omniav1.CapabilityVision)
				})
			},
		},
		{
			name: "a role mismatch: an edit to the agent's spec brings it back",
			setup: func(t *testing.T, ns string) {
				cm, pack := packObjects(ns, "support-v1", "1.0.0", validPack)
				ctrltest.Create(t, env, cm, pack, mockProvider(ns, "llm"), newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
					a.Spec.Providers[0].Role = omniav1.ProviderRoleEmbedding
				}))
			},
			blocked: [3]string{string(omniav1.AgentRuntimePhaseFailed), omniav1.ConditionProviderReady, omniav1.ReasonRoleMismatch},
			fix: func(t *testing.T, ns string) {
				update(t, &omniav1.AgentRuntime{}, ns, "agent", func(o client.Object) { o.(*omniav1.AgentRuntime).Spec.Providers[0].Role = "" })
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t) //nolint:contextcheck // testenv deletes the namespace in a t.Cleanup, after any test context has ended, so it needs its own
			tc.setup(t, ns)
			ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhase(tc.blocked[0]), tc.blocked[1], tc.blocked[2]))
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "agent"}, &appsv1.Deployment{}); err == nil {
				t.Fatal("a Deployment was built while an input was unusable")
			}
			tc.fix(t, ns)
			ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionDeploymentReady, omniav1.ReasonDeploymentCreated))
		})
	}
}

// update reads an object, changes it and writes it back, retrying on
// conflicts with the controllers' own writes.
func update(t *testing.T, obj client.Object, ns, name string, mut func(client.Object)) {
	t.Helper()
	ctx := context.Background()
	ctrltest.Eventually(t, wait, func() error {
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
			return err
		}
		mut(obj)
		return env.Client.Update(ctx, obj)
	})
}

// TestConcurrencyWorkersPerController: the AgentRuntime, ToolRegistry and
// Workspace controllers run up to three reconciles at once, the PromptPack
// controller one, and no object is ever reconciled by two workers at the
// same time. Each controller is wired as the binary
// wires it, with a gate in place of its reconciler that holds every pass,
// so the counts are the controller's worker limit and nothing else.
func TestConcurrencyWorkersPerController(t *testing.T) {
	const objects, hold = 6, 1500 * time.Millisecond
	cases := []struct {
		name    string
		workers int
		setup   func(mgr ctrl.Manager, g *ctrltest.Gate) error
		create  func(t *testing.T, ns string, i int)
		touch   func(t *testing.T, ns string, i int) // a change that enqueues object i again
	}{
		{
			name: "AgentRuntime runs up to three reconciles at once", workers: 3,
			setup: func(mgr ctrl.Manager, g *ctrltest.Gate) error {
				return (&Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, g)
			},
			create: func(t *testing.T, ns string, i int) {
				ctrltest.Create(t, env, newAgent(ns, fmt.Sprintf("a%d", i), nil))
			},
			touch: func(t *testing.T, ns string, i int) {
				update(t, &omniav1.AgentRuntime{}, ns, fmt.Sprintf("a%d", i), func(o client.Object) { o.SetLabels(map[string]string{"touched": "yes"}) })
			},
		},
		{
			name: "ToolRegistry runs up to three reconciles at once", workers: 3,
			setup: func(mgr ctrl.Manager, g *ctrltest.Gate) error {
				return (&toolregistry.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, g)
			},
			create: func(t *testing.T, ns string, i int) {
				ctrltest.Create(t, env, clientRegistry(ns, fmt.Sprintf("r%d", i), "ask"))
			},
			touch: func(t *testing.T, ns string, i int) { // spec changes only: the registry ignores metadata
				update(t, &omniav1.ToolRegistry{}, ns, fmt.Sprintf("r%d", i), func(o client.Object) {
					o.(*omniav1.ToolRegistry).Spec.Handlers[0].Tool.Description = "changed"
				})
			},
		},
		{
			name: "Workspace runs up to three reconciles at once", workers: 3,
			setup: func(mgr ctrl.Manager, g *ctrltest.Gate) error {
				return (&workspace.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, g)
			},
			create: func(t *testing.T, ns string, i int) { // cluster-scoped: named after the test namespace
				w := &omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-w%d", ns, i)},
					Spec: omniav1.WorkspaceSpec{Namespace: omniav1.WorkspaceNamespace{Name: fmt.Sprintf("%s-w%d", ns, i)}}}
				ctrltest.Create(t, env, w)
				t.Cleanup(func() { _ = env.Client.Delete(context.Background(), w) })
			},
			touch: func(t *testing.T, ns string, i int) {
				update(t, &omniav1.Workspace{}, "", fmt.Sprintf("%s-w%d", ns, i), func(o client.Object) { o.SetLabels(map[string]string{"touched": "yes"}) })
			},
		},
		{
			name: "PromptPack runs one reconcile at a time", workers: 1,
			setup: func(mgr ctrl.Manager, g *ctrltest.Gate) error {
				return (&promptpack.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, g)
			},
			create: func(t *testing.T, ns string, i int) {
				cm, p := packObjects(ns, fmt.Sprintf("p%d", i), fmt.Sprintf("1.0.%d", i), validPack)
				ctrltest.Create(t, env, cm, p)
			},
			touch: func(t *testing.T, ns string, i int) {
				update(t, &omniav1.PromptPack{}, ns, fmt.Sprintf("p%d", i), func(o client.Object) { o.SetLabels(map[string]string{"touched": "yes"}) })
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			g := &ctrltest.Gate{Hold: hold}
			ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error { return tc.setup(mgr, g) })
			for i := range objects {
				tc.create(t, ns, i)
			}
			// While the first passes are held, enqueue the same objects
			// again: the queue must not hand one to a second worker.
			ctrltest.Eventually(t, wait, func() error {
				if p, _, _ := g.Stats(); p == 0 {
					return fmt.Errorf("no pass started yet")
				}
				return nil
			})
			for i := range objects {
				tc.touch(t, ns, i)
			}
			ctrltest.Eventually(t, 2*wait, func() error {
				if p, _, _ := g.Stats(); p < objects+1 {
					return fmt.Errorf("%d passes so far", p)
				}
				return nil
			})
			passes, most, twice := g.Stats()
			if most != tc.workers {
				t.Fatalf("%d reconciles ran at once (over %d passes); want exactly %d", most, passes, tc.workers)
			}
			if twice {
				t.Fatal("one object was reconciled by two workers at the same time")
			}
		})
	}
}

func clientRegistry(ns, name, tool string) *omniav1.ToolRegistry {
	return &omniav1.ToolRegistry{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: omniav1.ToolRegistrySpec{Handlers: []omniav1.HandlerDefinition{{
		Name: tool, Type: omniav1.HandlerTypeClient, Tool: &omniav1.ToolDefinition{Name: tool, Description: "ask the user",
			InputSchema: apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}}}}}}
}

// erring stands in for a reconciler whose dependency keeps failing: every
// pass returns an error; it records when each pass of objects in ns
// started (the controllers also see other tests' objects).
type erring struct {
	ns    string
	mu    sync.Mutex
	times []time.Time
}

func (e *erring) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace == e.ns {
		e.mu.Lock()
		e.times = append(e.times, time.Now())
		e.mu.Unlock()
	}
	return reconcile.Result{}, errors.New("dependency down")
}

func (e *erring) starts() []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Time(nil), e.times...)
}

// TestErrorRetriedWithGrowingBackoff: after an error controller-runtime
// requeues the object with its default per-item exponential backoff, so a
// flapping dependency is retried with growing gaps and not hammered: each
// controller, wired as the binary wires it, is given one object and a
// reconciler that always fails; the retries must come back with gaps that
// grow, and only a handful of them in a few seconds.
func TestErrorRetriedWithGrowingBackoff(t *testing.T) {
	const watchFor = 2500 * time.Millisecond
	cases := []struct {
		name   string
		setup  func(mgr ctrl.Manager, rec reconcile.Reconciler) error
		create func(t *testing.T, ns string)
	}{
		{"AgentRuntime", func(mgr ctrl.Manager, rec reconcile.Reconciler) error {
			return (&Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, rec)
		}, func(t *testing.T, ns string) { ctrltest.Create(t, env, newAgent(ns, "agent", nil)) }},
		{"PromptPack", func(mgr ctrl.Manager, rec reconcile.Reconciler) error {
			return (&promptpack.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, rec)
		}, func(t *testing.T, ns string) {
			cm, p := packObjects(ns, "support-v1", "1.0.0", validPack)
			ctrltest.Create(t, env, cm, p)
		}},
		{"ToolRegistry", func(mgr ctrl.Manager, rec reconcile.Reconciler) error {
			return (&toolregistry.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, rec)
		}, func(t *testing.T, ns string) { ctrltest.Create(t, env, clientRegistry(ns, "tools", "ask")) }},
		{"Provider", func(mgr ctrl.Manager, rec reconcile.Reconciler) error {
			return (&provider.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, rec)
		}, func(t *testing.T, ns string) { ctrltest.Create(t, env, mockProvider(ns, "llm")) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			e := &erring{ns: ns}
			ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error { return tc.setup(mgr, e) })
			tc.create(t, ns)
			ctrltest.Eventually(t, wait, func() error {
				if len(e.starts()) == 0 {
					return fmt.Errorf("no pass yet")
				}
				return nil
			})
			time.Sleep(watchFor)
			ts := e.starts()
			// The default limiter starts at 5 ms and doubles: about ten
			// passes fit in 2.5 s; a fixed short delay would make hundreds.
			if len(ts) < 5 || len(ts) > 20 {
				t.Fatalf("%d passes in %s; want a handful (exponential backoff)", len(ts), watchFor)
			}
			first, last := ts[2].Sub(ts[1]), ts[len(ts)-1].Sub(ts[len(ts)-2])
			if last < 8*first {
				t.Fatalf("gaps did not grow: first %s, last %s (passes at %v)", first, last, ts)
			}
		})
	}
}
