package agentruntime

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// TestFlowToRunning walks the main path of a pass: the PromptPack
// resolves, the missing ToolRegistry is recorded and skipped, the Provider
// is usable, the Deployment and Service are built, the agent is Pending
// with no ready replica and Running once one is ready.
func TestFlowToRunning(t *testing.T) {
	ns := env.Namespace(t)
	startAll(t)
	createWithInputs(t, ns, newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.ToolRegistryRef = &omniav1.ToolRegistryRef{Name: "absent"}
	}))
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionReady, omniav1.ReasonRuntimeNotReady))
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionToolRegistryReady, omniav1.ReasonToolRegistryNotFound))
	dep := ctrltest.Get[appsv1.Deployment](t, env, types.NamespacedName{Namespace: ns, Name: "agent"})
	if !metav1.IsControlledBy(dep, mustAgent(t, ns, "agent")) {
		t.Fatal("Deployment not owned by the agent")
	}
	if dep.Spec.Template.Spec.Containers[0].Image != testConfig.RuntimeImage || dep.Spec.Template.Spec.Volumes[0].ConfigMap.Name != "support-v1" {
		t.Fatalf("pod template %+v", dep.Spec.Template.Spec)
	}
	ctrltest.Get[corev1.Service](t, env, types.NamespacedName{Namespace: ns, Name: "agent"})
	markPodsReady(t, ns, "agent")
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhaseRunning, omniav1.ConditionReady, omniav1.ReasonRuntimeReady))
	a := mustAgent(t, ns, "agent")
	if a.Status.ActiveVersion == nil || *a.Status.ActiveVersion != "1.0.0" || a.Status.Replicas == nil || a.Status.Replicas.Ready != 1 {
		t.Fatalf("status %+v", a.Status)
	}
	if a.Status.ServiceEndpoint != fmt.Sprintf("agent.%s.svc.cluster.local:8080", ns) {
		t.Fatalf("serviceEndpoint %q", a.Status.ServiceEndpoint)
	}
}

func mustAgent(t *testing.T, ns, name string) *omniav1.AgentRuntime {
	t.Helper()
	a, err := getAgent(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestTemplateStableAcrossUnrelatedReconciles: every input present when
// the agent is created (pack, Provider, ToolRegistry) is in the first
// Deployment, so there is one ReplicaSet from the start; reconciles caused
// by things that are not pod inputs (agent labels, pack, Provider and
// registry status churn) replace no pod and create no ReplicaSet; a real
// input change (a newer pack version on the followed channel) does roll
// the template.
func TestTemplateStableAcrossUnrelatedReconciles(t *testing.T) {
	ns := env.Namespace(t)
	counter := startAll(t)
	ctx := context.Background()
	createWithInputs(t, ns, clientRegistry(ns, "tools", "ask"))
	// The inputs exist before the agent does: once the pack has been
	// validated, the informers have long seen the registry too.
	ctrltest.Eventually(t, wait, func() error {
		p := &omniav1.PromptPack{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "support-v1"}, p); err != nil {
			return fmt.Errorf("pack not read yet: %w", err)
		}
		if p.Status.Phase != omniav1.PromptPackPhaseActive {
			return fmt.Errorf("pack in phase %q, not Active yet", p.Status.Phase)
		}
		return nil
	})
	ctrltest.Create(t, env, toolsAgent(ns))
	ctrltest.Eventually(t, wait, func() error {
		if n := len(replicaSets(t, ns, "agent")); n != 1 {
			return fmt.Errorf("%d ReplicaSets", n)
		}
		if n := len(pods(t, ns, "agent")); n != 1 {
			return fmt.Errorf("%d pods", n)
		}
		return nil
	})
	podUID := pods(t, ns, "agent")[0].UID
	dep := ctrltest.Get[appsv1.Deployment](t, env, types.NamespacedName{Namespace: ns, Name: "agent"})
	gen := dep.Generation
	key := types.NamespacedName{Namespace: ns, Name: "agent"}
	before := counter.Count(key)

	// Unrelated changes, each of which reconciles the agent.
	a := mustAgent(t, ns, "agent")
	a.Labels = map[string]string{"team": "support"}
	if err := env.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	p := ctrltest.Get[omniav1.Provider](t, env, types.NamespacedName{Namespace: ns, Name: "llm"})
	p.Labels = map[string]string{"tier": "gold"}
	if err := env.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	tr := &omniav1.ToolRegistry{} // no ToolRegistry controller runs: play its status write
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "tools"}, tr); err != nil {
		t.Fatal(err)
	}
	tr.Status.Phase, tr.Status.DiscoveredToolsCount = omniav1.ToolRegistryPhaseReady, 1
	if err := env.Client.Status().Update(ctx, tr); err != nil {
		t.Fatal(err)
	}
	markPodsReady(t, ns, "agent") // the Deployment's status changes too
	ctrltest.Eventually(t, wait, func() error {
		if n := counter.Count(key); n < before+4 {
			return fmt.Errorf("%d reconciles since, want at least 4", n-before)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if err := env.Client.Get(ctx, key, dep); err != nil {
		t.Fatal(err)
	}
	if dep.Generation != gen {
		t.Fatalf("Deployment generation %d -> %d on unrelated reconciles", gen, dep.Generation)
	}
	ctrltest.Holds(t, replicaSetsAre(t, ns, "agent", 1)) // after unrelated reconciles
	if ps := pods(t, ns, "agent"); len(ps) != 1 || ps[0].UID != podUID {
		t.Fatalf("pod replaced on unrelated reconciles")
	}

	// A real input change: version 1.1.0 validates and becomes the stable
	// channel's Active version.
	cm2, pack2 := packObjects(ns, "support-v2", "1.1.0", validPack)
	ctrltest.Create(t, env, cm2, pack2)
	ctrltest.Eventually(t, wait, func() error {
		if err := replicaSetsAre(t, ns, "agent", 2)(); err != nil { // the pack moved
			return err
		}
		a := mustAgent(t, ns, "agent")
		if a.Status.ActiveVersion == nil || *a.Status.ActiveVersion != "1.1.0" {
			return fmt.Errorf("activeVersion %v", a.Status.ActiveVersion)
		}
		return nil
	})
}

// TestWatchesBringAgentBack: an agent created before its pack and with a
// Provider that is not Ready yet moves on through the watches alone.
func TestWatchesBringAgentBack(t *testing.T) {
	ns := env.Namespace(t)
	startAll(t)
	ctrltest.Create(t, env, newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.Providers[0].RequiredCapabilities = []omniav1.ProviderCapability{omniav1.CapabilityTools}
	}))
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhaseFailed, omniav1.ConditionPromptPackReady, omniav1.ReasonPromptPackNotFound))
	cm, pack := packObjects(ns, "support-v1", "1.0.0", validPack)
	ctrltest.Create(t, env, cm, pack)
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhaseFailed, omniav1.ConditionProviderReady, omniav1.ReasonProviderNotFound))
	prov := mockProvider(ns, "llm", omniav1.CapabilityText)
	ctrltest.Create(t, env, prov)
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionProviderReady, omniav1.ReasonCapabilityMismatch))
	ctx := context.Background()
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "llm"}, prov); err != nil {
		t.Fatal(err)
	}
	prov.Spec.Capabilities = append(prov.Spec.Capabilities, omniav1.CapabilityTools)
	if err := env.Client.Update(ctx, prov); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionDeploymentReady, omniav1.ReasonDeploymentCreated))
}

// TestAutoscaling: autoscaling on builds an HPA the agent owns; the HPA
// is owned, so deleting it brings the agent back through the watch on
// owned objects, which builds it again; off again removes it.
func TestAutoscaling(t *testing.T) {
	ns := env.Namespace(t)
	startAll(t)
	ctx := context.Background()
	createWithInputs(t, ns, newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.Runtime = &omniav1.RuntimeConfig{Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MaxReplicas: ptr(int32(4))}}
	}))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	key := types.NamespacedName{Namespace: ns, Name: "agent"}
	ctrltest.Eventually(t, wait, func() error { return env.Client.Get(ctx, key, hpa) })
	if hpa.Spec.MaxReplicas != 4 || hpa.Spec.ScaleTargetRef.Name != "agent" {
		t.Fatalf("hpa %+v", hpa.Spec)
	}
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionAutoscalingReady, omniav1.ReasonScaling))
	if !metav1.IsControlledBy(hpa, mustAgent(t, ns, "agent")) {
		t.Fatal("HPA not owned by the agent")
	}
	deletedAndRecreated(t, hpa)
	a := mustAgent(t, ns, "agent")
	a.Spec.Runtime.Autoscaling.Enabled = false
	if err := env.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, func() error {
		return ctrltest.Gone("HPA", env.Client.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{}))
	})
}

// TestRequeueSplit calls Reconcile directly against a cache with the field
// indexes: references to missing objects return an error (retried with
// backoff); spec problems and waits return nil with no timer.
func TestRequeueSplit(t *testing.T) {
	ns := env.Namespace(t)
	other := env.Namespace(t)
	ctx := context.Background()
	c := ctrltest.StartManager(t, env)
	r := &Reconciler{Client: c, Config: testConfig}

	cm, good := packObjects(ns, "good", "1.0.0", validPack)
	ctrltest.Create(t, env, cm, good)
	setPackPhase(t, good, omniav1.PromptPackPhaseActive)
	cmBad, bad := packObjects(ns, "bad", "1.0.0", `{}`)
	bad.Spec.PackName = "broken"
	ctrltest.Create(t, env, cmBad, bad)
	setPackPhase(t, bad, omniav1.PromptPackPhaseFailed)
	live := &omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: ns}, Spec: omniav1.PromptPackSpec{PackName: "dev", Version: "0.1.0",
		Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeLive, Live: &omniav1.LivePromptSource{URL: "http://127.0.0.1:1/pack.json"}}}}
	cmMixed, published := packObjects(ns, "dev-published", "1.0.0", validPack)
	published.Spec.PackName = "mixed"
	liveMixed := live.DeepCopy()
	liveMixed.Name, liveMixed.Spec.PackName = "mixed-live", "mixed"
	ctrltest.Create(t, env, live, cmMixed, published, liveMixed)
	for _, p := range []*omniav1.PromptPack{live, published, liveMixed} {
		setPackPhase(t, p, omniav1.PromptPackPhaseActive)
	}
	ready := func(p *omniav1.Provider) *omniav1.Provider {
		ctrltest.Create(t, env, p)
		p.Status.Phase = omniav1.ProviderPhaseReady
		if err := env.Client.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ready(mockProvider(ns, "llm", omniav1.CapabilityText))
	emb := mockProvider(ns, "embedder")
	emb.Spec.Type, emb.Spec.Role, emb.Spec.Model = omniav1.ProviderTypeOllama, omniav1.ProviderRoleEmbedding, "nomic"
	ready(emb)
	ctrltest.Create(t, env, mockProvider(ns, "unready")) // no status: not Ready
	ready(mockProvider(other, "llm"))

	rollout := &omniav1.RolloutConfig{Steps: []omniav1.RolloutStep{{SetWeight: ptr(int32(10))}}}
	cases := []struct {
		name   string
		mut    func(*omniav1.AgentRuntime)
		err    bool
		phase  omniav1.AgentRuntimePhase
		reason string
	}{
		{"no-pack", func(a *omniav1.AgentRuntime) { a.Spec.PromptPackRef.Name = "nothing" }, true, omniav1.AgentRuntimePhaseFailed, omniav1.ReasonPromptPackNotFound},
		{"failed-pack", func(a *omniav1.AgentRuntime) { a.Spec.PromptPackRef.Name = "broken" }, false, omniav1.AgentRuntimePhaseFailed, omniav1.ReasonPromptPackInvalid},
		{"live-in-rollout", func(a *omniav1.AgentRuntime) {
			a.Spec.PromptPackRef = omniav1.PromptPackRef{Name: "dev", Version: ptr("0.1.0")}
			a.Spec.Rollout = rollout
		}, false, omniav1.AgentRuntimePhaseFailed, omniav1.ReasonPromptPackRefInvalid},
		{"mixed", func(a *omniav1.AgentRuntime) { a.Spec.PromptPackRef.Name = "mixed" }, false, omniav1.AgentRuntimePhaseFailed, omniav1.ReasonPromptPackRefInvalid},
		{"no-provider", func(a *omniav1.AgentRuntime) { a.Spec.Providers[0].ProviderRef.Name = "nobody" }, true, omniav1.AgentRuntimePhaseFailed, omniav1.ReasonProviderNotFound},
		{"cross-ns-provider", func(a *omniav1.AgentRuntime) { a.Spec.Providers[0].ProviderRef.Namespace = &other }, true, omniav1.AgentRuntimePhaseFailed, omniav1.ReasonProviderCrossNamespace},
		{"role-mismatch", func(a *omniav1.AgentRuntime) { a.Spec.Providers[0].ProviderRef.Name = "embedder" }, false, omniav1.AgentRuntimePhaseFailed, omniav1.ReasonRoleMismatch},
		{"not-ready", func(a *omniav1.AgentRuntime) { a.Spec.Providers[0].ProviderRef.Name = "unready" }, false, omniav1.AgentRuntimePhasePending, omniav1.ReasonProviderNotReady},
		{"capability", func(a *omniav1.AgentRuntime) {
			a.Spec.Providers[0].RequiredCapabilities = []omniav1.ProviderCapability{omniav1.CapabilityVision}
		}, false, omniav1.AgentRuntimePhasePending, omniav1.ReasonCapabilityMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctrltest.Create(t, env, newAgent(ns, tc.name, tc.mut))
			var res reconcile.Result
			var err error
			ctrltest.Eventually(t, wait, func() error {
				if cerr := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: tc.name}, &omniav1.AgentRuntime{}); cerr != nil {
					return cerr
				}
				res, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: tc.name}})
				if err != nil && !tc.err {
					return fmt.Errorf("unexpected error (retrying in case the cache lagged): %w", err)
				}
				return nil
			})
			if (err != nil) != tc.err || res.RequeueAfter != 0 {
				t.Fatalf("result %+v err %v; want error=%v and no timer", res, err, tc.err)
			}
			ctrltest.Eventually(t, wait, func() error {
				a := mustAgent(t, ns, tc.name)
				cond := meta.FindStatusCondition(a.Status.Conditions, omniav1.ConditionPromptPackReady)
				if tc.reason == omniav1.ReasonProviderNotFound || tc.reason == omniav1.ReasonProviderCrossNamespace ||
					tc.reason == omniav1.ReasonRoleMismatch || tc.reason == omniav1.ReasonProviderNotReady || tc.reason == omniav1.ReasonCapabilityMismatch {
					cond = meta.FindStatusCondition(a.Status.Conditions, omniav1.ConditionProviderReady)
				}
				if a.Status.Phase != tc.phase || cond == nil || cond.Reason != tc.reason {
					return fmt.Errorf("phase %q cond %+v; want %q %s", a.Status.Phase, cond, tc.phase, tc.reason)
				}
				return nil
			})
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: tc.name}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
				t.Fatalf("a Deployment was built from a half-resolved spec: %v", err)
			}
		})
	}
}

func setPackPhase(t *testing.T, p *omniav1.PromptPack, phase omniav1.PromptPackPhase) {
	t.Helper()
	p.Status.Phase = phase
	if err := env.Client.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}
