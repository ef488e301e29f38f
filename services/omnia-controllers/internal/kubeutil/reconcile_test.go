package kubeutil

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestGetAndLive: a missing object is no error for Get, Lookup (which
// returns nil) or Live; Live also skips an object being deleted; any other
// failure is returned, by Get and Lookup with the kind and key.
func TestGetAndLive(t *testing.T) {
	now := metav1.Now()
	live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: "ns"}}
	dying := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dying", Namespace: "ns", DeletionTimestamp: &now, Finalizers: []string{"keep"}}}
	boom := errors.New("boom")
	c := fake.NewClientBuilder().WithObjects(live, dying).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if key.Name == "broken" {
				return boom
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	cases := []struct {
		name                string
		found, ok           bool
		getErr, liveErrText string
	}{
		{name: "live", found: true, ok: true},
		{name: "dying", found: true, ok: false},
		{name: "missing"},
		{name: "broken", getErr: "get ConfigMap ns/broken: boom", liveErrText: "boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := types.NamespacedName{Namespace: "ns", Name: tc.name}
			found, err := Get(context.Background(), c, key, &corev1.ConfigMap{})
			if found != tc.found || errText(err) != tc.getErr || (err != nil && !errors.Is(err, boom)) {
				t.Fatalf("Get = %v, %v; want %v, %q", found, err, tc.found, tc.getErr)
			}
			got, err := Lookup[corev1.ConfigMap](context.Background(), c, key)
			if (got != nil) != tc.found || errText(err) != tc.getErr {
				t.Fatalf("Lookup = %v, %v; want found %v, %q", got, err, tc.found, tc.getErr)
			}
			ok, err := Live(context.Background(), c, key, &corev1.ConfigMap{})
			if ok != tc.ok || errText(err) != tc.liveErrText {
				t.Fatalf("Live = %v, %v; want %v, %q", ok, err, tc.ok, tc.liveErrText)
			}
		})
	}
}

// TestGetNamesClusterScopedByName: a cluster-scoped key is named without
// a namespace separator.
func TestGetNamesClusterScopedByName(t *testing.T) {
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errors.New("down")
		},
	}).Build()
	_, err := Get(context.Background(), c, types.NamespacedName{Name: "team-a"}, &corev1.Namespace{})
	if errText(err) != "get Namespace team-a: down" {
		t.Fatalf("error %v", err)
	}
}

// TestPassTime: the pass time is the clock's, truncated to the second;
// a nil clock is the wall clock.
func TestPassTime(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 999_000_000, time.UTC)
	if got := PassTime(func() time.Time { return at }); !got.Equal(&metav1.Time{Time: at.Truncate(time.Second)}) {
		t.Fatalf("PassTime = %v", got)
	}
	if got := PassTime(nil); time.Since(got.Time) > time.Minute || got.Nanosecond() != 0 {
		t.Fatalf("PassTime(nil) = %v", got)
	}
}

// TestJudgementWarnsOnTransitionsOnly: an event is added only for a
// changed condition, its message capped at MaxMessage.
func TestJudgementWarnsOnTransitionsOnly(t *testing.T) {
	var conds []metav1.Condition
	j := Judgement{Conditions: &conds, Generation: 3, Now: metav1.Now(), MaxMessage: 5}
	j.WarnOn(j.Set("Ready", metav1.ConditionFalse, "Bad", "long message"), "Bad", "long message")
	j.WarnOn(j.Set("Ready", metav1.ConditionFalse, "Bad", "long message"), "Bad", "long message")
	if len(j.Events) != 1 || len(j.Events[0].Message) > 5 || j.Events[0].Type != corev1.EventTypeWarning {
		t.Fatalf("events %+v", j.Events)
	}
	if len(conds) != 1 || conds[0].ObservedGeneration != 3 {
		t.Fatalf("conditions %+v", conds)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimSpace(err.Error())
}
