package ctrltest

import (
	"context"
	"fmt"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentplane/agentplane/libs/testenv"
)

// Wirer is a controller's reconciler as the tests wire it: its
// SetupWithManager calls rec, when not nil, instead of itself.
type Wirer interface {
	SetupWithManager(mgr ctrl.Manager, rec reconcile.Reconciler) error
}

// Start runs a manager with the controller newR builds on the manager's
// client, its passes going to rec (the real reconciler when nil).
func Start(t testing.TB, env *testenv.Env, newR func(client.Client) Wirer, rec reconcile.Reconciler) {
	t.Helper()
	StartManager(t, env, func(mgr ctrl.Manager) error { return newR(mgr.GetClient()).SetupWithManager(mgr, rec) })
}

// StartCounting runs the controller newR builds with passes that always
// succeed, so that only a watch can bring one, and returns their count.
func StartCounting(t testing.TB, env *testenv.Env, newR func(client.Client) Wirer) *Counter {
	t.Helper()
	passes := &Counter{Inner: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	})}
	Start(t, env, newR, passes)
	return passes
}

// CheckWorkers shows the worker count the controller newR builds is wired
// with: it holds each pass for hold, creates n objects (more than want)
// in a namespace of the test's own, as object builds them, waits until
// each had a pass and fails t unless exactly want passes ran at once, and
// never two of one object.
func CheckWorkers(t *testing.T, env *testenv.Env, newR func(client.Client) Wirer, hold time.Duration, want, n int,
	object func(ns, name string) client.Object) {
	t.Helper()
	ns := env.Namespace(t)
	gate := &Gate{Hold: hold}
	Start(t, env, newR, gate)
	for i := range n {
		if err := env.Client.Create(context.Background(), object(ns, fmt.Sprintf("o-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	Eventually(t, 30*time.Second, func() error {
		if passes, _, _ := gate.Stats(); passes < n {
			return fmt.Errorf("%d passes", passes)
		}
		return nil
	})
	if _, most, twice := gate.Stats(); most != want || twice {
		t.Fatalf("%d passes ran at once (one object twice: %v); want %d", most, twice, want)
	}
}
