package agentruntime

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// testClock is the controller's clock in timer tests: it moves only when
// the test moves it, so deadlines hours away pass without sleeping.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// results wraps the AgentRuntime reconciler and keeps the Result of each
// object's latest successful pass: the timer the controller asked for.
type results struct {
	inner  reconcile.Reconciler
	mu     sync.Mutex
	last   map[types.NamespacedName]reconcile.Result
	passes map[types.NamespacedName]int
}

func (r *results) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.inner.Reconcile(ctx, req)
	if err == nil {
		r.mu.Lock()
		if r.last == nil {
			r.last = map[types.NamespacedName]reconcile.Result{}
			r.passes = map[types.NamespacedName]int{}
		}
		r.last[req.NamespacedName] = res
		r.passes[req.NamespacedName]++
		r.mu.Unlock()
	}
	return res, err
}

// pokeAndWait pokes the agent and waits for a successful pass that
// started after the poke was written.
func (r *results) pokeAndWait(t *testing.T, ns, name string) {
	t.Helper()
	key := types.NamespacedName{Namespace: ns, Name: name}
	r.mu.Lock()
	before := r.passes[key]
	r.mu.Unlock()
	poke(t, ns, name)
	ctrltest.Eventually(t, wait, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.passes[key] <= before {
			return fmt.Errorf("no pass after the poke yet")
		}
		return nil
	})
}

// requeueIs is a condition for ctrltest.Eventually: the latest successful
// pass of the agent asked for exactly want.
func (r *results) requeueIs(ns, name string, want time.Duration) func() error {
	return func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		res, ok := r.last[types.NamespacedName{Namespace: ns, Name: name}]
		if !ok || res != (reconcile.Result{RequeueAfter: want}) {
			return fmt.Errorf("last result %+v (seen %v); want RequeueAfter %s", res, ok, want)
		}
		return nil
	}
}

// startTimed runs the controllers as startAll does, with the test's clock
// and any other change mut makes to the AgentRuntime reconciler.
func startTimed(t *testing.T, clock *testClock, mut func(*Reconciler)) *results {
	t.Helper()
	out := &results{}
	startStack(t, func(_ ctrl.Manager, r *Reconciler) reconcile.Reconciler {
		r.Now = clock.Now
		if mut != nil {
			mut(r)
		}
		out.inner = r
		return out
	})
	return out
}

var pokes sync.Map

// poke changes a label of the agent: a watch event that is no input of
// any decision, so the next pass sees only what the clock changed. An
// agent already gone (reaped by a pass the clock change raced with) needs
// no poke.
func poke(t *testing.T, ns, name string) {
	t.Helper()
	n, _ := pokes.LoadOrStore(ns+"/"+name, new(int))
	p := n.(*int)
	*p++
	v := strconv.Itoa(*p)
	ctx := context.Background()
	ctrltest.Eventually(t, wait, func() error {
		a := &omniav1.AgentRuntime{}
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, a)
		if err == nil {
			if a.Labels == nil {
				a.Labels = map[string]string{}
			}
			a.Labels["test-poke"] = v
			err = env.Client.Update(ctx, a)
		}
		return client.IgnoreNotFound(err)
	})
}

// reportActivity writes the session report as the agent's first pod
// would (applyReport).
func reportActivity(t *testing.T, ns, name string, sessions int32, last time.Time) {
	t.Helper()
	pod := livePod(t, ns, name)
	ctrltest.Eventually(t, wait, func() error { return applyReport(env.Client, ns, name, pod, sessions, last) })
}

func idleIs(ns, name string, status metav1.ConditionStatus, reason string) func() error {
	return func() error {
		a, err := getAgent(ns, name)
		if err != nil {
			return err
		}
		return ctrltest.ConditionIs(a.Status.Conditions, omniav1.ConditionIdle, status, reason)
	}
}

func replicasAre(ns, name string, want int32) func() error {
	return ctrltest.ObjectIs(env.Client, types.NamespacedName{Namespace: ns, Name: name}, func(dep *appsv1.Deployment) error {
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas != want {
			return fmt.Errorf("Deployment replicas %v; want %d", deref(dep.Spec.Replicas), want)
		}
		return nil
	})
}

// idleAgent creates an agent with idleTimeout 10m whose last session
// activity was at the clock's time, and waits for its Deployment.
func idleAgent(t *testing.T, ns string, clock *testClock, mut func(*omniav1.AgentRuntime)) {
	t.Helper()
	createWithInputs(t, ns, newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.IdleTimeout = &metav1.Duration{Duration: 10 * time.Minute}
		if mut != nil {
			mut(a)
		}
	}))
	ctrltest.Eventually(t, wait, func() error {
		a, err := getAgent(ns, "agent")
		if err != nil {
			return err
		}
		want := int32(1)
		if rt := a.Spec.Runtime; rt != nil && rt.Replicas != nil {
			want = *rt.Replicas
		}
		return replicasAre(ns, "agent", want)()
	})
	reportActivity(t, ns, "agent", 0, clock.Now())
}

// startIdle runs the controllers on a test clock and creates an idleAgent
// (mut, when not nil, changes it) in a fresh namespace.
func startIdle(t *testing.T, mut func(*omniav1.AgentRuntime)) (string, *testClock, *results) {
	t.Helper()
	ns, clock := env.Namespace(t), newTestClock()
	res := startTimed(t, clock, nil)
	idleAgent(t, ns, clock, mut)
	return ns, clock, res
}

// requestWake moves the clock an hour on and sets the wake annotation to
// that time, as a client waking a reaped agent does.
func requestWake(t *testing.T, ns string, clock *testClock) {
	t.Helper()
	clock.Set(clock.Now().Add(time.Hour))
	update(t, &omniav1.AgentRuntime{}, ns, "agent", func(o client.Object) {
		o.SetAnnotations(map[string]string{omniav1.AnnotationWakeRequestedAt: clock.Now().Format(time.RFC3339)})
	})
}

// reapedAtDeadline checks the deadline of an idleAgent whose last session
// just closed: the timer is the whole idle timeout; a minute before the
// deadline the agent still runs replicas and holds also hold; at the
// deadline it is reaped (reap).
func reapedAtDeadline(t *testing.T, ns string, clock *testClock, res *results, replicas int32, holds ...func() error) {
	t.Helper()
	ctrltest.Eventually(t, wait, res.requeueIs(ns, "agent", 10*time.Minute))
	clock.Set(clock.Now().Add(9 * time.Minute))
	res.pokeAndWait(t, ns, "agent")
	ctrltest.Holds(t, append([]func() error{replicasAre(ns, "agent", replicas)}, holds...)...)
	reap(t, ns, clock, res)
}

// reap moves the clock past the deadline of an idleAgent and waits until
// the agent is held at zero.
func reap(t *testing.T, ns string, clock *testClock, res *results) {
	t.Helper()
	clock.Set(clock.Now().Add(10 * time.Minute))
	poke(t, ns, "agent")
	ctrltest.Eventually(t, wait, idleIs(ns, "agent", metav1.ConditionTrue, omniav1.ReasonIdleTimeoutExceeded))
	ctrltest.Eventually(t, wait, replicasAre(ns, "agent", 0))
	ctrltest.Eventually(t, wait, res.requeueIs(ns, "agent", 0))
}

// TestIdleRequeueIsTimeLeft: before the deadline the only timer is the
// time left to it, counted from the last session activity.
func TestIdleRequeueIsTimeLeft(t *testing.T) {
	ns, clock, res := startIdle(t, nil)
	ctrltest.Eventually(t, wait, res.requeueIs(ns, "agent", 10*time.Minute))
	clock.Set(clock.Now().Add(3 * time.Minute))
	poke(t, ns, "agent")
	ctrltest.Eventually(t, wait, res.requeueIs(ns, "agent", 7*time.Minute))
	ctrltest.Eventually(t, wait, idleIs(ns, "agent", metav1.ConditionFalse, omniav1.ReasonActive))
	ctrltest.Holds(t, replicasAre(ns, "agent", 1))
}

// TestIdleScalesToZeroAfterDeadline: past the deadline idleAction
// scaleToZero holds the Deployment at zero and the agent is Pending with
// Idle=True/IdleTimeoutExceeded from the very status write that reaps it
// (while its last pods still count as ready), IdleReaped is recorded, and
// nothing is requeued while it sleeps.
func TestIdleScalesToZeroAfterDeadline(t *testing.T) {
	ns, clock, res := startIdle(t, nil)
	ctx := context.Background()
	markPodsReady(t, ns, "agent")
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhaseRunning, omniav1.ConditionReady, omniav1.ReasonRuntimeReady))
	// Watch every version written from now on, not just the latest.
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &omniav1.AgentRuntimeList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	reap(t, ns, clock, res)
	for first := true; first; {
		ev, ok := <-w.ResultChan()
		if !ok {
			t.Fatal("watch closed before the reaping was seen")
		}
		a, isAgent := ev.Object.(*omniav1.AgentRuntime)
		if !isAgent || !meta.IsStatusConditionTrue(a.Status.Conditions, omniav1.ConditionIdle) {
			continue
		}
		first = false
		if a.Status.Phase != omniav1.AgentRuntimePhasePending || meta.IsStatusConditionTrue(a.Status.Conditions, omniav1.ConditionReady) {
			t.Fatalf("reaping written with phase %q Ready=%v; want Pending, not Ready", a.Status.Phase, meta.FindStatusCondition(a.Status.Conditions, omniav1.ConditionReady))
		}
	}
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionReady, omniav1.ReasonRuntimeNotReady))
	ctrltest.Eventually(t, wait, func() error {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == omniav1.EventIdleReaped && e.Regarding.Name == "agent" && e.Type == corev1.EventTypeNormal {
				return nil
			}
		}
		return fmt.Errorf("no Normal IdleReaped event among %d", len(evs.Items))
	})
	// Hours later, with nothing changed, the agent still sleeps.
	clock.Set(clock.Now().Add(48 * time.Hour))
	res.pokeAndWait(t, ns, "agent")
	ctrltest.Holds(t, res.requeueIs(ns, "agent", 0), replicasAre(ns, "agent", 0), idleIs(ns, "agent", metav1.ConditionTrue, omniav1.ReasonIdleTimeoutExceeded))
}

// TestIdleActiveSessionsKeepAgentUp: while the runtime reports open
// sessions there is no deadline, however long ago the last activity was.
func TestIdleActiveSessionsKeepAgentUp(t *testing.T) {
	ns, clock, res := startIdle(t, nil)
	twoOpen := func() error {
		a, err := getAgent(ns, "agent")
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(a.Status.Conditions, omniav1.ConditionIdle); c == nil || c.Reason != omniav1.ReasonActive || c.Message != "2 session(s) open" {
			return fmt.Errorf("Idle %+v; want Active with 2 sessions", c)
		}
		return nil
	}
	reportActivity(t, ns, "agent", 2, clock.Now())
	// The report is in the controller's cache before the clock moves:
	// a pass between the jump and the report's arrival would rightly reap
	// an agent whose last activity was an hour before.
	poke(t, ns, "agent")
	ctrltest.Eventually(t, wait, twoOpen)
	clock.Set(clock.Now().Add(time.Hour))
	poke(t, ns, "agent")
	ctrltest.Eventually(t, wait, twoOpen)
	ctrltest.Eventually(t, wait, res.requeueIs(ns, "agent", 0))
	ctrltest.Holds(t, replicasAre(ns, "agent", 1))
}

// TestIdleWakeByAnnotation: setting the wake annotation on a reaped agent
// restores its replicas with Idle=False/WakeRequested and restarts the
// deadline from the wake.
func TestIdleWakeByAnnotation(t *testing.T) {
	ns, clock, res := startIdle(t, func(a *omniav1.AgentRuntime) { a.Spec.Runtime = &omniav1.RuntimeConfig{Replicas: ptr(int32(2))} })
	reap(t, ns, clock, res)
	requestWake(t, ns, clock)
	ctrltest.Eventually(t, wait, idleIs(ns, "agent", metav1.ConditionFalse, omniav1.ReasonWakeRequested))
	ctrltest.Eventually(t, wait, replicasAre(ns, "agent", 2))
	ctrltest.Eventually(t, wait, res.requeueIs(ns, "agent", 10*time.Minute))
	// The same annotation value does not wake it again once it is reaped
	// anew; it sleeps until the value changes.
	reap(t, ns, clock, res)
	clock.Set(clock.Now().Add(time.Minute))
	res.pokeAndWait(t, ns, "agent")
	ctrltest.Holds(t, res.requeueIs(ns, "agent", 0), replicasAre(ns, "agent", 0))
}

// TestIdleWakeBySpecEdit: a spec change wakes a reaped agent.
func TestIdleWakeBySpecEdit(t *testing.T) {
	ns, clock, res := startIdle(t, nil)
	reap(t, ns, clock, res)
	update(t, &omniav1.AgentRuntime{}, ns, "agent", func(o client.Object) {
		o.(*omniav1.AgentRuntime).Spec.IdleTimeout = &metav1.Duration{Duration: 20 * time.Minute}
	})
	ctrltest.Eventually(t, wait, idleIs(ns, "agent", metav1.ConditionFalse, omniav1.ReasonWakeRequested))
	ctrltest.Eventually(t, wait, replicasAre(ns, "agent", 1))
	ctrltest.Eventually(t, wait, res.requeueIs(ns, "agent", 20*time.Minute))
}

// TestIdleDeleteActionRemovesAgent: past the deadline idleAction delete
// deletes the AgentRuntime (the finalizer is released by the next pass).
func TestIdleDeleteActionRemovesAgent(t *testing.T) {
	ns, clock, _ := startIdle(t, func(a *omniav1.AgentRuntime) { a.Spec.IdleAction = omniav1.IdleDelete })
	clock.Set(clock.Now().Add(10 * time.Minute))
	poke(t, ns, "agent")
	ctrltest.Eventually(t, wait, func() error {
		_, err := getAgent(ns, "agent")
		return ctrltest.Gone("agent", err)
	})
}

// TestIdleWakeUnderWorkspaceHPA: an agent autoscaled by its Workspace's
// default HPA is held at zero by the idle deadline like any other; woken,
// its Deployment is set to the HPA's minReplicas, since the HPA itself
// never scales a target up from zero.
func TestIdleWakeUnderWorkspaceHPA(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	clock := newTestClock()
	res := startTimed(t, clock, nil)
	ws := &omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: omniav1.WorkspaceSpec{
		Namespace: omniav1.WorkspaceNamespace{Name: ns},
		Services: []omniav1.WorkspaceServiceGroup{{Name: omniav1.DefaultServiceGroup,
			Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MinReplicas: ptr(int32(2)), MaxReplicas: ptr(int32(4))}}},
	}}
	ctrltest.Create(t, env, ws)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ws) })
	createWithInputs(t, ns, newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.IdleTimeout = &metav1.Duration{Duration: 10 * time.Minute}
	}))
	key := types.NamespacedName{Namespace: ns, Name: "agent"}
	ctrltest.Eventually(t, wait, func() error {
		if err := env.Client.Get(ctx, key, &appsv1.Deployment{}); err != nil {
			return err
		}
		return env.Client.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{})
	})
	reportActivity(t, ns, "agent", 0, clock.Now())
	reap(t, ns, clock, res)

	requestWake(t, ns, clock)
	ctrltest.Eventually(t, wait, idleIs(ns, "agent", metav1.ConditionFalse, omniav1.ReasonWakeRequested))
	ctrltest.Eventually(t, wait, replicasAre(ns, "agent", 2))
}
