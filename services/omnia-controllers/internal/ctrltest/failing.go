package ctrltest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Failing wraps a client. Calls named in Fail ("get *v1.ConfigMap",
// "list *v1alpha1.PromptPackList", "status *v1alpha1.PromptPack": the verb
// and the Go type of the object) fail with 503 Service Unavailable, as
// they would from an overloaded API server; every call is recorded in
// Calls, so a test can also show which kinds a controller reads.
type Failing struct {
	client.Client
	// Fail names the calls to fail.
	Fail map[string]bool

	mu    sync.Mutex
	calls []string
}

// Call names a call the way Fail and Calls do.
func Call(verb string, obj any) string { return fmt.Sprintf("%s %T", verb, obj) }

func (f *Failing) check(verb string, obj any) error {
	c := Call(verb, obj)
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	if f.Fail[c] {
		return apierrors.NewServiceUnavailable("injected failure: " + c)
	}
	return nil
}

// Calls returns the calls made so far.
func (f *Failing) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// Get fails or delegates.
func (f *Failing) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := f.check("get", obj); err != nil {
		return err
	}
	return f.Client.Get(ctx, key, obj, opts...)
}

// List fails or delegates.
func (f *Failing) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := f.check("list", list); err != nil {
		return err
	}
	return f.Client.List(ctx, list, opts...)
}

// Create fails or delegates.
func (f *Failing) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := f.check("create", obj); err != nil {
		return err
	}
	return f.Client.Create(ctx, obj, opts...)
}

// Update fails or delegates.
func (f *Failing) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := f.check("update", obj); err != nil {
		return err
	}
	return f.Client.Update(ctx, obj, opts...)
}

// Status wraps the status writer so "status <type>" calls can fail too.
func (f *Failing) Status() client.SubResourceWriter {
	return &failingStatus{SubResourceWriter: f.Client.Status(), f: f}
}

type failingStatus struct {
	client.SubResourceWriter
	f *Failing
}

func (s *failingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.f.check("status", obj); err != nil {
		return err
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s *failingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.f.check("status", obj); err != nil {
		return err
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// IsInjected reports whether err carries a failure Failing injected.
func IsInjected(err error) bool {
	return apierrors.IsServiceUnavailable(err)
}

// FailingOn wraps c so that the one call named fail fails (see Failing).
func FailingOn(c client.Client, fail string) *Failing {
	return &Failing{Client: c, Fail: map[string]bool{fail: true}}
}

// ReturnsInjected runs one pass of r and fails t unless the pass returned
// the failure Failing injected and asked for no timer: a transient API
// error goes back to controller-runtime, whose backoff retries the pass.
func ReturnsInjected(t testing.TB, ctx context.Context, r reconcile.Reconciler, req reconcile.Request) {
	t.Helper()
	res, err := r.Reconcile(ctx, req)
	if !IsInjected(err) || res != (reconcile.Result{}) {
		t.Fatalf("result %+v err %v; want the injected 503 returned and no timer", res, err)
	}
}

// Retried is an Eventually condition for the passes controller-runtime
// makes after a failure: each call runs one pass of r on req. A pass that
// returns an error is tried again (a stale cache may still hide what the
// failed pass wrote); a successful pass that asks for a timer fails t at
// once, since success is never requeued; the condition holds once a
// successful pass leaves the state then checks.
func Retried(t testing.TB, ctx context.Context, r reconcile.Reconciler, req reconcile.Request, then func() error) func() error {
	return func() error {
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			return err
		}
		if res != (reconcile.Result{}) {
			t.Fatalf("a successful pass asked for %+v; success is never requeued", res)
		}
		return then()
	}
}

// Failure is one case of a transient-failure test: the call that fails
// (named as Call names it), "" for a pass in which nothing does.
type Failure struct {
	Name string
	Fail string
}

// CheckFailuresReturned runs each case as a subtest on an object of its
// own: prepare creates case i's object, waits until the cache c shows
// what a pass reads, and returns its request; when the case fails a call,
// a pass of newR over a client failing that call must return the
// injected error (ReturnsInjected); then healthy checks the passes on c
// that follow, as controller-runtime's retries would make them.
func CheckFailuresReturned(t *testing.T, c client.Client, newR func(client.Client) reconcile.Reconciler, cases []Failure,
	prepare func(t *testing.T, i int) reconcile.Request, healthy func(t *testing.T, req reconcile.Request)) {
	t.Helper()
	for i, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			req := prepare(t, i)
			if tc.Fail != "" {
				ReturnsInjected(t, context.Background(), newR(FailingOn(c, tc.Fail)), req)
			}
			healthy(t, req)
		})
	}
}
