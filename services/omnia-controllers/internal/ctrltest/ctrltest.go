// Package ctrltest starts the controllers of this module in a manager
// against a testenv control plane, for the integration tests of each
// controller package.
package ctrltest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// quietLogs silences controller-runtime once per test binary: the tests
// provoke reconcile errors on purpose and assert on results instead.
var quietLogs sync.Once

// Setup wires one controller into a manager.
type Setup func(mgr ctrl.Manager) error

// ByHand starts a test that makes its passes itself: it returns a
// namespace of the test's own, the context of its calls, and the cached
// client of a manager that runs no controller (StartManager with none),
// so no pass runs but the test's.
func ByHand(t testing.TB, env *testenv.Env) (ns string, ctx context.Context, c client.Client) {
	t.Helper()
	return env.Namespace(t), context.Background(), StartManager(t, env)
}

// Create creates objs through env's API server, in order, and fails t on
// the first that is refused: the setup step of nearly every test here,
// whose failure leaves nothing to test.
func Create(t testing.TB, env *testenv.Env, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// Get reads the object at key through env's API server, not a cache,
// into a new T, and fails t when it cannot: for a test that must see the
// object's stored state and has nothing to check when it is gone.
func Get[T any, P interface {
	*T
	client.Object
}](t testing.TB, env *testenv.Env, key types.NamespacedName) P {
	t.Helper()
	obj := P(new(T))
	if err := env.Client.Get(context.Background(), key, obj); err != nil {
		t.Fatalf("get %T %s: %v", obj, key, err)
	}
	return obj
}

// Agent is the smallest AgentRuntime name in ns the API server admits: it
// serves pack over a WebSocket facade. The controllers that select,
// notify or call agents read no more of one.
func Agent(ns, name, pack string) *omniav1.AgentRuntime {
	return &omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: omniav1.AgentRuntimeSpec{PromptPackRef: omniav1.PromptPackRef{Name: pack}, Facades: []omniav1.FacadeConfig{{Type: omniav1.FacadeTypeWebSocket}}}}
}

// StartManager runs a manager with the shared field indexes and the given
// controllers until the test ends, and returns its cached client.
func StartManager(t testing.TB, env *testenv.Env, setups ...Setup) client.Client {
	t.Helper()
	quietLogs.Do(func() { ctrl.SetLogger(logr.Discard()) })
	opts := ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlConfig(),
	}
	// The cache is limited as in the binary, so the tests see what it sees.
	kubeutil.ApplyCacheOptions(&opts)
	mgr, err := ctrl.NewManager(env.Config, opts)
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := index.Setup(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	for _, s := range setups {
		if err := s(mgr); err != nil {
			t.Fatalf("setup controller: %v", err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return mgr.GetClient()
}

// Counter wraps a reconciler and counts its passes per object.
type Counter struct {
	// Inner is the wrapped reconciler.
	Inner reconcile.Reconciler
	mu    sync.Mutex
	n     map[types.NamespacedName]int
}

// Reconcile counts and delegates.
func (c *Counter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[types.NamespacedName]int{}
	}
	c.n[req.NamespacedName]++
	c.mu.Unlock()
	return c.Inner.Reconcile(ctx, req)
}

// Count returns the passes made for one object so far.
func (c *Counter) Count(key types.NamespacedName) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// Total returns the passes made for all objects so far.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}

// Drain waits until no pass has run for a whole quiet period: the queue
// has worked off the echoes of earlier writes, so what runs after is new.
func (c *Counter) Drain(quiet time.Duration) {
	for last := -1; last != c.Total(); {
		last = c.Total()
		time.Sleep(quiet)
	}
}

// Eventually polls cond every 100ms until it returns nil or timeout
// passes, then fails the test with the last error.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("condition not met within %s", timeout), cond)
}

// Gone is a condition for Eventually on a read of what: nil once the read
// finds it NotFound, else the read's error or that what is still there.
func Gone(what string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read %s: %w", what, err)
	}
	return fmt.Errorf("%s still there", what)
}

// Consistently polls cond for the whole duration and fails on the first
// error.
func Consistently(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := cond(); err != nil {
			t.Fatalf("condition broken: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Holds fails the test on the first cond that does not hold now: for a
// state a test already waited for, or must still see after a pass it
// waited for, checked once without polling.
func Holds(t testing.TB, conds ...func() error) {
	t.Helper()
	for _, cond := range conds {
		if err := cond(); err != nil {
			t.Fatal(err)
		}
	}
}

// PhaseReason is the check behind the tests' phase conditions: nil when
// the status is in phase want and its condition typ has reason, else what
// was found instead.
func PhaseReason[P ~string](phase P, conds []metav1.Condition, want P, typ, reason string) error {
	c := meta.FindStatusCondition(conds, typ)
	if phase != want || c == nil || c.Reason != reason {
		return fmt.Errorf("phase %q %s=%+v; want %q %s", phase, typ, c, want, reason)
	}
	return nil
}

// ConditionIs is the check behind the tests' condition waits: nil when
// conds has a condition typ with status and reason, else what was found
// instead.
func ConditionIs(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) error {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil || c.Status != status || c.Reason != reason {
		return fmt.Errorf("condition %s = %+v, want %s/%s", typ, c, status, reason)
	}
	return nil
}

// ObjectIs is an Eventually condition on the object at key, read through
// c into a new T: nil once check holds for it, else the read's error or
// check's.
func ObjectIs[T any, P interface {
	*T
	client.Object
}](c client.Reader, key types.NamespacedName, check func(P) error) func() error {
	return func() error {
		obj := P(new(T))
		if err := c.Get(context.Background(), key, obj); err != nil {
			return err
		}
		return check(obj)
	}
}

// ReadyPhase is an Eventually condition on the object at key, read
// through c into a new T: its status is written for its generation, in
// phase, with the Ready condition's reason. of returns what it compares:
// the status's phase, observedGeneration and conditions.
func ReadyPhase[T any, P interface {
	*T
	client.Object
}, Ph ~string](c client.Reader, key types.NamespacedName, phase Ph, reason string, of func(P) (Ph, int64, []metav1.Condition)) func() error {
	return ObjectIs(c, key, func(obj P) error {
		got, observed, conds := of(obj)
		if observed != obj.GetGeneration() {
			return fmt.Errorf("observedGeneration %d of %d", observed, obj.GetGeneration())
		}
		return PhaseReason(got, conds, phase, omniav1.ConditionReady, reason)
	})
}
