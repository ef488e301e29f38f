package agentruntime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// TestBuildGuards: a framework without an image waits for an edit
// (FrameworkReady False, Pending, no error, Warning event path), and a
// Deployment of the same name that the agent does not own is left alone
// (DeploymentReady False, error so the conflict is retried).
func TestBuildGuards(t *testing.T) {
	ns, ctx, c := ctrltest.ByHand(t, env)
	r := &Reconciler{Client: c, Config: testConfig}
	readyInputs(t, ns)
	ctrltest.Create(t, env,
		newAgent(ns, "langchain", func(a *omniav1.AgentRuntime) {
			a.Spec.Framework = &omniav1.FrameworkConfig{Type: omniav1.FrameworkLangChain}
		}),
		newAgent(ns, "taken", nil),
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "mine"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "mine"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "mine:1"}}}}}})

	reconcileUntil := func(name string, wantErr bool) {
		ctrltest.Eventually(t, wait, func() error {
			_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
			if (err != nil) != wantErr {
				return err
			}
			return nil
		})
	}
	reconcileUntil("langchain", false)
	ctrltest.Eventually(t, wait, agentIs(ns, "langchain", omniav1.AgentRuntimePhasePending, omniav1.ConditionFrameworkReady, omniav1.ReasonFrameworkImageUnavailable))

	reconcileUntil("taken", true)
	ctrltest.Eventually(t, wait, agentIs(ns, "taken", omniav1.AgentRuntimePhaseFailed, omniav1.ConditionDeploymentReady, omniav1.ReasonDeploymentFailed))
	dep := ctrltest.Get[appsv1.Deployment](t, env, types.NamespacedName{Namespace: ns, Name: "taken"})
	if dep.Spec.Template.Spec.Containers[0].Image != "mine:1" || len(dep.OwnerReferences) != 0 {
		t.Fatal("a Deployment the agent does not own was changed")
	}
}

// readyInputs creates pack version 1.0.0 (Active) and a Ready mock
// Provider "llm" without running their controllers, for tests that call
// Reconcile by hand.
func readyInputs(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	cm, pack := packObjects(ns, "support-v1", "1.0.0", validPack)
	ctrltest.Create(t, env, cm, pack)
	setPackPhase(t, pack, omniav1.PromptPackPhaseActive)
	prov := mockProvider(ns, "llm")
	ctrltest.Create(t, env, prov)
	prov.Status.Phase = omniav1.ProviderPhaseReady
	if err := env.Client.Status().Update(ctx, prov); err != nil {
		t.Fatal(err)
	}
}

// reconcileUntil calls Reconcile until done accepts the pass's error
// (and whatever else done checks), absorbing the cache's lag behind the
// test's writes: an early pass may not see the agent or its inputs yet.
func reconcileUntil(t *testing.T, r *Reconciler, ns, name string, done func(error) error) {
	t.Helper()
	ctrltest.Eventually(t, wait, func() error {
		_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		return done(err)
	})
}

// built accepts a pass that returned no error and left the agent with
// its Deployment written.
func built(ns, name string) func(error) error {
	return func(err error) error {
		if err != nil {
			return err
		}
		return agentIs(ns, name, omniav1.AgentRuntimePhasePending, omniav1.ConditionDeploymentReady, omniav1.ReasonDeploymentCreated)()
	}
}

// failsWith accepts a pass whose error mentions fragment.
func failsWith(fragment string) func(error) error {
	return func(err error) error {
		switch {
		case err == nil:
			return fmt.Errorf("no error; want one mentioning %q", fragment)
		case !strings.Contains(err.Error(), fragment):
			return fmt.Errorf("want an error mentioning %q, got: %w", fragment, err)
		}
		return nil
	}
}

// TestStaleCacheCreateIsRetried: a create that meets AlreadyExists (the
// cache had not yet seen the object the previous pass created) is a
// conflict to retry, not a refusal: the agent is not marked Failed.
func TestStaleCacheCreateIsRetried(t *testing.T) {
	ns, ctx, c := ctrltest.ByHand(t, env)
	readyInputs(t, ns)
	ctrltest.Create(t, env, newAgent(ns, "agent", nil))
	r := &Reconciler{Client: c, Config: testConfig}
	reconcileUntil(t, r, ns, "agent", built(ns, "agent"))

	// The stale cache: it does not show the Deployment that exists.
	stale := &Reconciler{Config: testConfig, Client: ctrltest.Intercept(c, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*appsv1.Deployment); ok {
				return apierrors.NewNotFound(appsv1.Resource("deployments"), key.Name)
			}
			return cl.Get(ctx, key, obj, opts...)
		},
	})}
	_, err := stale.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "agent"}})
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("err %v; want the AlreadyExists returned, for a retry with backoff", err)
	}
	a := mustAgent(t, ns, "agent")
	if a.Status.Phase == omniav1.AgentRuntimePhaseFailed {
		t.Fatalf("AlreadyExists after a stale read marked the agent Failed: %+v", a.Status.Conditions)
	}
	reconcileUntil(t, r, ns, "agent", built(ns, "agent"))
}

// TestFinalizerKeepsOtherFinalizers: adding and removing the agent's
// finalizer from a copy read before another actor added its own never
// drops that actor's finalizer; the stale write is refused as a conflict
// and the next pass, on a fresh read, succeeds.
func TestFinalizerKeepsOtherFinalizers(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	r := &Reconciler{Client: env.Client, Config: testConfig}
	key := types.NamespacedName{Namespace: ns, Name: "agent"}
	const other, late = "example.com/keep", "example.com/late"
	addFinalizer := func(name string) {
		update(t, &omniav1.AgentRuntime{}, ns, "agent", func(o client.Object) {
			controllerutil.AddFinalizer(o, name)
		})
	}
	has := func(names ...string) {
		t.Helper()
		a := mustAgent(t, ns, "agent")
		for _, n := range names {
			if !controllerutil.ContainsFinalizer(a, n) {
				t.Fatalf("finalizers %v; %s was dropped", a.Finalizers, n)
			}
		}
	}
	t.Cleanup(func() { // let the namespace go
		a := &omniav1.AgentRuntime{}
		if env.Client.Get(ctx, key, a) == nil {
			a.Finalizers = nil
			_ = env.Client.Update(ctx, a)
		}
	})
	ctrltest.Create(t, env, newAgent(ns, "agent", nil))

	stale := mustAgent(t, ns, "agent")
	addFinalizer(other)
	if err := r.setFinalizer(ctx, stale, true); !apierrors.IsConflict(err) {
		t.Fatalf("adding from a stale copy: err %v, want a conflict", err)
	}
	has(other)
	if err := r.setFinalizer(ctx, mustAgent(t, ns, "agent"), true); err != nil {
		t.Fatal(err)
	}
	has(other, omniav1.AgentRuntimeFinalizer)

	stale = mustAgent(t, ns, "agent")
	addFinalizer(late)
	if err := env.Client.Delete(ctx, stale.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := r.setFinalizer(ctx, stale, false); !apierrors.IsConflict(err) {
		t.Fatalf("removing from a stale copy: err %v, want a conflict", err)
	}
	has(other, late, omniav1.AgentRuntimeFinalizer)
	// The deletion pass on a fresh read releases only the agent's own.
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	has(other, late)
	if a := mustAgent(t, ns, "agent"); controllerutil.ContainsFinalizer(a, omniav1.AgentRuntimeFinalizer) {
		t.Fatalf("finalizers %v; the agent's own was not released", a.Finalizers)
	}
}

// TestForeignHPAIsRefused: an HPA of the agent's name that the agent does
// not control is refused, not taken over: AutoscalingReady=False/NotOwned
// names it, the error is returned for a retry, the HPA is left as it was
// and the rest of the agent is still built.
func TestForeignHPAIsRefused(t *testing.T) {
	ns, ctx, c := ctrltest.ByHand(t, env)
	readyInputs(t, ns)
	foreign := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "someone-else"},
		MinReplicas:    ptr(int32(1)), MaxReplicas: 9}}
	ctrltest.Create(t, env, foreign, newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.Runtime = &omniav1.RuntimeConfig{Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MaxReplicas: ptr(int32(4))}}
	}))
	r := &Reconciler{Client: c, Config: testConfig}
	reconcileUntil(t, r, ns, "agent", failsWith("HorizontalPodAutoscaler "+ns+"/agent exists and is not controlled by this AgentRuntime"))
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionAutoscalingReady, omniav1.ReasonAutoscalerNotOwned))
	got := ctrltest.Get[autoscalingv2.HorizontalPodAutoscaler](t, env, types.NamespacedName{Namespace: ns, Name: "agent"})
	if len(got.OwnerReferences) != 0 || got.Spec.MaxReplicas != 9 || got.Spec.ScaleTargetRef.Name != "someone-else" {
		t.Fatalf("the foreign HPA was taken over: owners %v, spec %+v", got.OwnerReferences, got.Spec)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "agent"}, &appsv1.Deployment{}); err != nil {
		t.Fatalf("the agent's Deployment was not built: %v", err)
	}
}

// TestOwnedObjectEditsAreReverted: edits to the Deployment, Service and
// HPA the agent owns — kubectl edit style, leaving the applied-hash
// annotation as it was — are reverted by the next pass, which their own
// watch brings; reconciles that change nothing write nothing.
func TestOwnedObjectEditsAreReverted(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	// Updates of the agent's Deployment, Service and HPA that the API
	// server took. A pass over a cache that lags its own last write sends
	// that write again with the old resourceVersion and gets a conflict:
	// it changes nothing, so it is not counted. Only this test's namespace
	// counts: the manager also reconciles the agents earlier tests left,
	// whose inputs this test's controllers may complete. Each write is
	// described by what it changed on the server's copy, so a failure
	// says which input moved.
	var (
		mu   sync.Mutex
		what []string
	)
	res := startTimed(t, newTestClock(), func(r *Reconciler) {
		r.Client = ctrltest.Intercept(r.Client, interceptor.Funcs{
			Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				switch obj.(type) {
				case *appsv1.Deployment, *corev1.Service, *autoscalingv2.HorizontalPodAutoscaler:
				default:
					return cl.Update(ctx, obj, opts...)
				}
				if obj.GetNamespace() != ns {
					return cl.Update(ctx, obj, opts...)
				}
				prev := obj.DeepCopyObject().(client.Object)
				prevErr := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), prev)
				err := cl.Update(ctx, obj, opts...)
				if err == nil {
					d := fmt.Sprintf("server copy unreadable: %v", prevErr)
					if prevErr == nil {
						d = diff.Diff(ownedFields(prev), ownedFields(obj))
					}
					mu.Lock()
					what = append(what, fmt.Sprintf("%T %s (resourceVersion %s → %s; inputs now %s):\n%s", obj, obj.GetName(), prev.GetResourceVersion(), obj.GetResourceVersion(), hashInputs(ctx, obj.GetNamespace()), d))
					mu.Unlock()
				}
				return err
			},
		})
	})
	createWithInputs(t, ns, newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		withVolumes(a)
		a.Spec.Runtime.Autoscaling = &omniav1.AutoscalingConfig{Enabled: true, MaxReplicas: ptr(int32(3))}
	}))
	key := types.NamespacedName{Namespace: ns, Name: "agent"}
	ctrltest.Eventually(t, wait, func() error { return env.Client.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{}) })
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionAutoscalingReady, omniav1.ReasonScaling))

	// Passes over objects as the API server stores them, defaults and
	// all, find nothing to repair.
	res.pokeAndWait(t, ns, "agent")
	mu.Lock()
	before := len(what)
	mu.Unlock()
	res.pokeAndWait(t, ns, "agent")
	res.pokeAndWait(t, ns, "agent")
	mu.Lock()
	extra := what[before:]
	mu.Unlock()
	if len(extra) != 0 {
		t.Fatalf("%d writes of unchanged owned objects:\n%s\n\nearlier writes:\n%s", len(extra), strings.Join(extra, "\n"), strings.Join(what[:before], "\n"))
	}

	update(t, &appsv1.Deployment{}, ns, "agent", func(o client.Object) {
		c := &o.(*appsv1.Deployment).Spec.Template.Spec.Containers[0]
		c.Image = "someone/else:1"
		c.Env = append(c.Env, corev1.EnvVar{Name: "INJECTED", Value: "1"})
	})
	ctrltest.Eventually(t, wait, ctrltest.ObjectIs(env.Client, key, func(d *appsv1.Deployment) error {
		c := d.Spec.Template.Spec.Containers[0]
		if c.Image != testConfig.RuntimeImage {
			return fmt.Errorf("image %q, want it reverted to %q", c.Image, testConfig.RuntimeImage)
		}
		for _, e := range c.Env {
			if e.Name == "INJECTED" {
				return fmt.Errorf("the injected variable is still there")
			}
		}
		return nil
	}))

	update(t, &corev1.Service{}, ns, "agent", func(o client.Object) {
		s := o.(*corev1.Service)
		s.Spec.Selector["app"] = "someone-else"
		s.Spec.Ports[0].Port = 9999
	})
	ctrltest.Eventually(t, wait, ctrltest.ObjectIs(env.Client, key, func(s *corev1.Service) error {
		if _, ok := s.Spec.Selector["app"]; ok || s.Spec.Ports[0].Port != DefaultFacadePort {
			return fmt.Errorf("selector %v port %d, want them reverted", s.Spec.Selector, s.Spec.Ports[0].Port)
		}
		return nil
	}))

	update(t, &autoscalingv2.HorizontalPodAutoscaler{}, ns, "agent", func(o client.Object) {
		o.(*autoscalingv2.HorizontalPodAutoscaler).Spec.MaxReplicas = 50
	})
	ctrltest.Eventually(t, wait, ctrltest.ObjectIs(env.Client, key, func(h *autoscalingv2.HorizontalPodAutoscaler) error {
		if h.Spec.MaxReplicas != 3 {
			return fmt.Errorf("maxReplicas %d, want it reverted to 3", h.Spec.MaxReplicas)
		}
		return nil
	}))
}

// ownedFields are the parts of a Deployment, Service or HPA the controller
// writes, for a diff that leaves out status and bookkeeping.
func ownedFields(o client.Object) any {
	meta := struct {
		Labels, Annotations map[string]string
		Owners              []metav1.OwnerReference
	}{o.GetLabels(), o.GetAnnotations(), o.GetOwnerReferences()}
	switch v := o.(type) {
	case *appsv1.Deployment:
		return []any{meta, v.Spec}
	case *corev1.Service:
		return []any{meta, v.Spec}
	case *autoscalingv2.HorizontalPodAutoscaler:
		return []any{meta, v.Spec}
	}
	return meta
}

// hashInputs describes, as the API server has them now, the objects the
// agent's config hash is computed from.
func hashInputs(ctx context.Context, ns string) string {
	var b strings.Builder
	var packs omniav1.PromptPackList
	if err := env.Client.List(ctx, &packs, client.InNamespace(ns)); err == nil {
		for _, p := range packs.Items {
			fmt.Fprintf(&b, "pack %s rv %s phase %s digest %s; ", p.Name, p.ResourceVersion, p.Status.Phase, p.Status.ContentDigest)
		}
	}
	var provs omniav1.ProviderList
	if err := env.Client.List(ctx, &provs, client.InNamespace(ns)); err == nil {
		for _, p := range provs.Items {
			fmt.Fprintf(&b, "provider %s rv %s gen %d phase %s; ", p.Name, p.ResourceVersion, p.Generation, p.Status.Phase)
		}
	}
	return b.String()
}
