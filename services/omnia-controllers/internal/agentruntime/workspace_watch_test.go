package agentruntime

import (
	"context"
	"fmt"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// TestWorkspaceReachesAgentThroughWatch: the controller watches the
// Workspaces and maps each change back to the AgentRuntimes of the
// namespace it owns. Before each Workspace change the agent is settled —
// a pass has run on the current agent, Deployment and HPA, so no event of
// theirs is pending — which leaves the Workspace watch as the only way the
// change can reach the agent: a Workspace created after the agent, an edit
// of its service account and of its service-group autoscaling each reach
// the Deployment and HPA; a status write reconciles the agent without
// touching its Deployment; removing the group default removes the HPA;
// moving the Workspace to another namespace takes its defaults off the
// agents it left.
func TestWorkspaceReachesAgentThroughWatch(t *testing.T) {
	ns := env.Namespace(t)
	probe := startWithProbe(t, ns)
	ctx := context.Background()
	createWithInputs(t, ns,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "team-sa", Namespace: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "team-sa-2", Namespace: ns}},
		newAgent(ns, "agent", nil))
	key := types.NamespacedName{Namespace: ns, Name: "agent"}
	template := func(sa, wsName string) func() error {
		return ctrltest.ObjectIs(env.Client, key, func(d *appsv1.Deployment) error {
			p := d.Spec.Template
			got, _ := envValue(p, "OMNIA_WORKSPACE_NAME")
			if p.Spec.ServiceAccountName != sa || got != wsName {
				return fmt.Errorf("service account %q OMNIA_WORKSPACE_NAME %q; want %q %q", p.Spec.ServiceAccountName, got, sa, wsName)
			}
			return nil
		})
	}
	hpa := func(max int32) func() error { // max 0: no HPA
		return func() error {
			h := &autoscalingv2.HorizontalPodAutoscaler{}
			err := env.Client.Get(ctx, key, h)
			switch {
			case max == 0 && apierrors.IsNotFound(err):
				return nil
			case max == 0 && err == nil:
				return fmt.Errorf("HPA still there (max %d)", h.Spec.MaxReplicas)
			case err != nil:
				return err
			case h.Spec.MaxReplicas != max || *h.Spec.MinReplicas != 2:
				return fmt.Errorf("HPA min %d max %d, want 2 %d", *h.Spec.MinReplicas, h.Spec.MaxReplicas, max)
			}
			return nil
		}
	}
	ctrltest.Eventually(t, wait, template("agent-facade", ""))
	ctrltest.Eventually(t, wait, hpa(0))

	ws := &omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: omniav1.WorkspaceSpec{
		Namespace: omniav1.WorkspaceNamespace{Name: ns},
		Runtime:   &omniav1.WorkspaceRuntime{ServiceAccountName: "team-sa"},
		Services: []omniav1.WorkspaceServiceGroup{{Name: omniav1.DefaultServiceGroup,
			Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MinReplicas: ptr(int32(2)), MaxReplicas: ptr(int32(4))}}},
	}}
	probe.settle(t, key)
	ctrltest.Create(t, env, ws)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ws) })
	ctrltest.Eventually(t, wait, template("team-sa", ns))
	ctrltest.Eventually(t, wait, hpa(4))

	editWorkspace := func(mut func(*omniav1.Workspace)) {
		probe.settle(t, key)
		update(t, &omniav1.Workspace{}, "", ns, func(o client.Object) { mut(o.(*omniav1.Workspace)) })
	}
	editWorkspace(func(w *omniav1.Workspace) { w.Spec.Runtime.ServiceAccountName = "team-sa-2" })
	ctrltest.Eventually(t, wait, template("team-sa-2", ns))
	editWorkspace(func(w *omniav1.Workspace) { w.Spec.Services[0].Autoscaling.MaxReplicas = ptr(int32(6)) })
	ctrltest.Eventually(t, wait, hpa(6))

	// A status write (no Workspace controller runs here: play its write)
	// reconciles the agent but is not a pod input.
	probe.settle(t, key)
	dep := ctrltest.Get[appsv1.Deployment](t, env, key)
	written := &omniav1.Workspace{}
	ctrltest.Eventually(t, wait, func() error {
		if err := env.Client.Get(ctx, types.NamespacedName{Name: ns}, written); err != nil {
			return err
		}
		written.Status = omniav1.WorkspaceStatus{Phase: omniav1.WorkspacePhaseReady, ObservedGeneration: written.Generation, Conditions: []metav1.Condition{{
			Type: omniav1.ConditionNamespaceReady, Status: metav1.ConditionTrue, Reason: omniav1.ReasonNamespaceOwned, Message: "owned",
			LastTransitionTime: metav1.Now()}}}
		return env.Client.Status().Update(ctx, written)
	})
	ctrltest.Eventually(t, wait, func() error {
		if !probe.ranOnWorkspace(written.ResourceVersion) {
			return fmt.Errorf("no agent pass has run on the Workspace's status write yet")
		}
		return nil
	})
	after := ctrltest.Get[appsv1.Deployment](t, env, key)
	if after.Generation != dep.Generation {
		t.Fatalf("a Workspace status write changed the Deployment (generation %d → %d)", dep.Generation, after.Generation)
	}

	// The group default removed: the HPA goes (and with it the HPA
	// controller's periodic status writes, which would reconcile the
	// agent on their own).
	editWorkspace(func(w *omniav1.Workspace) { w.Spec.Services = nil })
	ctrltest.Eventually(t, wait, hpa(0))

	// Moved away: the agents of the namespace it left drop its defaults.
	editWorkspace(func(w *omniav1.Workspace) { w.Spec.Namespace.Name = ns + "-elsewhere" })
	ctrltest.Eventually(t, wait, template("agent-facade", ""))
}

// passInputs are the resourceVersions a pass could read from the cache
// when it started ("" for an object that did not exist).
type passInputs struct {
	agent, deployment, hpa, workspace string
}

// passProbe wraps the AgentRuntime reconciler and records the inputs of
// every completed pass, so a test knows which writes a pass has run on.
type passProbe struct {
	inner     reconcile.Reconciler
	cache     client.Client
	workspace string

	mu   sync.Mutex
	done []passInputs
}

func (p *passProbe) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	in := passInputs{
		agent:      resourceVersion(ctx, p.cache, req.NamespacedName, &omniav1.AgentRuntime{}),
		deployment: resourceVersion(ctx, p.cache, req.NamespacedName, &appsv1.Deployment{}),
		hpa:        resourceVersion(ctx, p.cache, req.NamespacedName, &autoscalingv2.HorizontalPodAutoscaler{}),
		workspace:  resourceVersion(ctx, p.cache, types.NamespacedName{Name: p.workspace}, &omniav1.Workspace{}),
	}
	res, err := p.inner.Reconcile(ctx, req)
	p.mu.Lock()
	p.done = append(p.done, in)
	p.mu.Unlock()
	return res, err
}

func resourceVersion(ctx context.Context, c client.Client, key types.NamespacedName, obj client.Object) string {
	if err := c.Get(ctx, key, obj); err != nil {
		return ""
	}
	return obj.GetResourceVersion()
}

func (p *passProbe) ran(want func(passInputs) bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, in := range p.done {
		if want(in) {
			return true
		}
	}
	return false
}

func (p *passProbe) ranOnWorkspace(rv string) bool {
	return p.ran(func(in passInputs) bool { return in.workspace == rv })
}

// settle waits until the Deployment controller is done with the agent's
// Deployment and a pass has completed on the current agent, Deployment
// and HPA: none of their events is left to reconcile the agent.
func (p *passProbe) settle(t *testing.T, key types.NamespacedName) {
	t.Helper()
	ctx := context.Background()
	ctrltest.Eventually(t, wait, ctrltest.ObjectIs(env.Client, key, func(d *appsv1.Deployment) error {
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas == 0 {
			return fmt.Errorf("Deployment %s still rolling", key)
		}
		now := passInputs{
			agent:      resourceVersion(ctx, env.Client, key, &omniav1.AgentRuntime{}),
			deployment: d.ResourceVersion,
			hpa:        resourceVersion(ctx, env.Client, key, &autoscalingv2.HorizontalPodAutoscaler{}),
		}
		if !p.ran(func(in passInputs) bool {
			return in.agent == now.agent && in.deployment == now.deployment && in.hpa == now.hpa
		}) {
			return fmt.Errorf("no pass has run on the agent's current objects yet")
		}
		return nil
	}))
}

// startWithProbe is startAll with the AgentRuntime reconciler wrapped in
// a passProbe watching the Workspace named workspace.
func startWithProbe(t *testing.T, workspace string) *passProbe {
	t.Helper()
	probe := &passProbe{workspace: workspace}
	startStack(t, func(mgr ctrl.Manager, r *Reconciler) reconcile.Reconciler {
		probe.inner, probe.cache = r, mgr.GetClient()
		return probe
	})
	return probe
}
