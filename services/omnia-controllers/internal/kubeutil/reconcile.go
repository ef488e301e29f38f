package kubeutil

import (
	"context"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Clock returns now, or time.Now when now is nil: every Reconciler's Now
// field is a clock that tests set and production leaves nil.
func Clock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}

// PassTime is the time a pass stamps on what it writes: the clock's
// reading truncated to the second, the precision the API server stores, so
// a status read back compares equal to the one written.
func PassTime(now func() time.Time) metav1.Time {
	return metav1.NewTime(Clock(now)().Truncate(time.Second))
}

// Get reads the object at key into obj. A missing object is no error: the
// pass's decision judges the absence, so found is false. Any other failure
// is wrapped with the kind and key and ends the pass.
func Get(ctx context.Context, c client.Reader, key types.NamespacedName, obj client.Object) (found bool, err error) {
	err = c.Get(ctx, key, obj)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	where := key.Name
	if key.Namespace != "" {
		where = key.String()
	}
	return false, fmt.Errorf("get %s %s: %w", kind(obj), where, err)
}

// Lookup reads the object at key into a new T: nil when there is none,
// for a snapshot whose decision judges the absence. Errors are Get's.
func Lookup[T any, P interface {
	*T
	client.Object
}](ctx context.Context, c client.Reader, key types.NamespacedName) (P, error) {
	obj := P(new(T))
	if found, err := Get(ctx, c, key, obj); !found {
		return nil, err
	}
	return obj, nil
}

// Live reads the object a pass reconciles into obj. ok is false when there
// is nothing to reconcile: the object is gone (its delete event brought
// the pass) or being deleted (what it owns goes with it through owner
// references). err is the failed read, unwrapped, for a retry with
// backoff.
func Live(ctx context.Context, c client.Reader, key types.NamespacedName, obj client.Object) (ok bool, err error) {
	if err := c.Get(ctx, key, obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return obj.GetDeletionTimestamp() == nil, nil
}

// kind names obj's Go type without package or pointer ("Secret"), as an
// error message names what it failed to read.
func kind(obj client.Object) string {
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}
