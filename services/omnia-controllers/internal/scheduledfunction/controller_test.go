package scheduledfunction

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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

// clock is a test clock the test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// soon shortens the controller's timer to 100 ms of real time: the test
// clock jumps, and the pass must see the jump without waiting a real
// minute. More passes than the schedule's periods run; each must find
// nothing to do but at a new scheduled time.
type soon struct{ inner reconcile.Reconciler }

func (s soon) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := s.inner.Reconcile(ctx, req)
	if res.RequeueAfter > 100*time.Millisecond {
		res.RequeueAfter = 100 * time.Millisecond
	}
	return res, err
}

func functionAgent(ns string) *omniav1.AgentRuntime {
	obj := &apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}
	return &omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Name: "fn", Namespace: ns},
		Spec: omniav1.AgentRuntimeSpec{Mode: omniav1.AgentModeFunction, InputSchema: obj, OutputSchema: obj,
			PromptPackRef: omniav1.PromptPackRef{Name: "pack"}, Facades: []omniav1.FacadeConfig{{Type: omniav1.FacadeTypeREST}}}}
}

func get(t *testing.T, ns string) *omniav1.ScheduledFunction {
	t.Helper()
	f := ctrltest.Get[omniav1.ScheduledFunction](t, env, types.NamespacedName{Namespace: ns, Name: "report"})
	return f
}

// TestFiresOncePerPeriod: a schedule of every minute, with the clock
// moved minute by minute, calls the function's invoke path exactly once per
// period and records each run; suspend stops the runs; a missed time
// further back than the starting deadline is skipped and counted, and the
// next time runs again.
func TestFiresOncePerPeriod(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == InvokePath && r.Method == http.MethodPost {
			hits.Add(1)
		}
	}))
	defer srv.Close()
	ctrltest.Create(t, env, functionAgent(ns))
	f := &omniav1.ScheduledFunction{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: ns},
		Spec: omniav1.ScheduledFunctionSpec{Schedule: "* * * * *", AgentRuntimeRef: omniav1.LocalObjectReference{Name: "fn"}}}
	ctrltest.Create(t, env, f)
	// The clock starts at the object's creation, so no time is due yet.
	first := f.CreationTimestamp.Time.Truncate(time.Minute).Add(time.Minute)
	clk := &clock{now: f.CreationTimestamp.Time}
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Now: clk.Now,
			Invoker: &HTTPInvoker{URL: func(*omniav1.AgentRuntime) string { return srv.URL + InvokePath }, Now: clk.Now}}
		return r.SetupWithManager(mgr, soon{r})
	})
	ctrltest.Eventually(t, wait, func() error {
		s := get(t, ns).Status
		if s.NextScheduleTime == nil || !s.NextScheduleTime.Time.Equal(first) {
			return fmt.Errorf("nextScheduleTime %v, want %v", s.NextScheduleTime, first)
		}
		return nil
	})
	ran := func(at time.Time, n int32, outcome omniav1.RunOutcome) func() error {
		return func() error {
			s := get(t, ns).Status
			if s.LastResult == nil || !s.LastResult.ScheduleTime.Time.Equal(at) || s.LastResult.Outcome != outcome || hits.Load() != n {
				return fmt.Errorf("lastResult %+v, %d calls; want %s at %v, %d calls", s.LastResult, hits.Load(), outcome, at, n)
			}
			return nil
		}
	}
	for i := range 3 {
		at := first.Add(time.Duration(i) * time.Minute)
		clk.Set(at.Add(5 * time.Second))
		ctrltest.Eventually(t, wait, ran(at, int32(i+1), omniav1.RunSucceeded))
		// Many passes run within the period; none calls again.
		ctrltest.Consistently(t, time.Second, ran(at, int32(i+1), omniav1.RunSucceeded))
	}
	if h := get(t, ns).Status.History; len(h) != 3 || h[0].HTTPStatus != 200 {
		t.Fatalf("history %+v", h)
	}

	update := func(mutate func(*omniav1.ScheduledFunction)) {
		t.Helper()
		cur := get(t, ns)
		mutate(cur)
		if err := env.Client.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	lastRun := first.Add(2 * time.Minute)
	t.Run("suspended, the function is not called", func(t *testing.T) {
		update(func(f *omniav1.ScheduledFunction) { f.Spec.Suspend = true })
		ctrltest.Eventually(t, wait, func() error {
			c := meta.FindStatusCondition(get(t, ns).Status.Conditions, omniav1.ConditionReady)
			if c == nil || c.Reason != omniav1.ReasonSuspended {
				return fmt.Errorf("Ready %+v", c)
			}
			return nil
		})
		clk.Set(lastRun.Add(time.Minute + 5*time.Second))
		ctrltest.Consistently(t, 2*time.Second, ran(lastRun, 3, omniav1.RunSucceeded))
	})
	t.Run("resumed past the starting deadline, the missed time is skipped and counted", func(t *testing.T) {
		clk.Set(lastRun.Add(2*time.Minute + 30*time.Second))
		update(func(f *omniav1.ScheduledFunction) {
			f.Spec.Suspend = false
			dl := int64(10)
			f.Spec.StartingDeadlineSeconds = &dl
		})
		ctrltest.Eventually(t, wait, ran(lastRun.Add(2*time.Minute), 3, omniav1.RunMissed))
		if m := get(t, ns).Status.MissedRuns; m != 2 {
			t.Fatalf("missedRuns %d, want 2", m)
		}
	})
	t.Run("the next time within the deadline runs", func(t *testing.T) {
		at := lastRun.Add(3 * time.Minute)
		clk.Set(at.Add(2 * time.Second))
		ctrltest.Eventually(t, wait, ran(at, 4, omniav1.RunSucceeded))
	})
}

// TestWrongModeIsACondition: an AgentRuntime in mode agent is a condition
// and nothing is called.
func TestWrongModeIsACondition(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	ctrltest.Create(t, env, ctrltest.Agent(ns, "fn", "pack"))
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient(), Invoker: &HTTPInvoker{}}).SetupWithManager(mgr, nil)
	})
	if err := env.Client.Create(ctx, &omniav1.ScheduledFunction{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: ns},
		Spec: omniav1.ScheduledFunctionSpec{Schedule: "* * * * *", AgentRuntimeRef: omniav1.LocalObjectReference{Name: "fn"}}}); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, func() error {
		c := meta.FindStatusCondition(get(t, ns).Status.Conditions, omniav1.ConditionAgentResolved)
		if c == nil || c.Reason != omniav1.ReasonAgentNotFunction {
			return fmt.Errorf("AgentResolved %+v", c)
		}
		return nil
	})
}

// TestThreeWorkers: the controller runs up to three passes at once.
func TestThreeWorkers(t *testing.T) {
	ctrltest.CheckWorkers(t, env, func(c client.Client) ctrltest.Wirer { return &Reconciler{Client: c} }, 500*time.Millisecond, 3, 6,
		func(ns, name string) client.Object {
			return &omniav1.ScheduledFunction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: omniav1.ScheduledFunctionSpec{Schedule: "* * * * *", AgentRuntimeRef: omniav1.LocalObjectReference{Name: "fn"}}}
		})
}
