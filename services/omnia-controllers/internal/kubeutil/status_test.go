package kubeutil

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestReconcileStatus: a pass decides only a live object, ends on a
// failed read, emits the decision's events, writes status only when it
// changed (a refused write is returned with the kind and key) and returns
// the decision's Retry.
func TestReconcileStatus(t *testing.T) {
	readFailed, retry := errors.New("read failed"), errors.New("retry")
	warn := Event{Type: corev1.EventTypeWarning, Reason: "Bad", Message: "bad"}
	cases := []struct {
		name       string
		object     string
		decision   Outcome[corev1.PodStatus]
		decideErr  error
		refuse     bool
		decided    bool
		writes     int
		events     int
		wantPhase  corev1.PodPhase
		wantErr    error
		wantErrMsg string
	}{
		{name: "a missing object is not decided", object: "gone"},
		{name: "a failed read ends the pass unwritten", object: "p", decideErr: readFailed, decided: true, wantErr: readFailed, wantPhase: corev1.PodPending},
		{name: "an unchanged status is not written", object: "p", decided: true, decision: Outcome[corev1.PodStatus]{Status: corev1.PodStatus{Phase: corev1.PodFailed}},
			wantPhase: corev1.PodPending},
		{name: "a changed status is written with its events", object: "p", decided: true, writes: 1, events: 1, wantPhase: corev1.PodFailed,
			decision: Outcome[corev1.PodStatus]{Status: corev1.PodStatus{Phase: corev1.PodFailed}, Changed: true, Events: []Event{warn}}},
		{name: "a refused write is returned with kind and key", object: "p", decided: true, refuse: true, writes: 1, wantPhase: corev1.PodPending,
			decision:   Outcome[corev1.PodStatus]{Status: corev1.PodStatus{Phase: corev1.PodFailed}, Changed: true},
			wantErrMsg: "write status of Pod ns/p: Operation cannot be fulfilled on pods \"p\": stale"},
		{name: "the retry is returned after the write", object: "p", decided: true, writes: 1, wantPhase: corev1.PodFailed, wantErr: retry,
			decision: Outcome[corev1.PodStatus]{Status: corev1.PodStatus{Phase: corev1.PodFailed}, Changed: true, Retry: retry}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stored := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
			writes := 0
			c := fake.NewClientBuilder().WithObjects(stored).WithStatusSubresource(stored).WithInterceptorFuncs(interceptor.Funcs{
				SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					writes++
					if tc.refuse {
						return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, obj.GetName(), errors.New("stale"))
					}
					return c.SubResource(sub).Update(ctx, obj, opts...)
				},
			}).Build()
			rec := events.NewFakeRecorder(10)
			pod, decided := &corev1.Pod{}, false
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: tc.object}}
			_, err := ReconcileStatus(context.Background(), StatusWriter{Client: c, Recorder: rec, Action: "Check"}, req, pod, &pod.Status,
				func(context.Context) (Outcome[corev1.PodStatus], error) {
					decided = true
					return tc.decision, tc.decideErr
				})
			switch {
			case tc.wantErrMsg != "":
				if errText(err) != tc.wantErrMsg || !apierrors.IsConflict(err) {
					t.Fatalf("error %v; want %q, a conflict", err, tc.wantErrMsg)
				}
			case !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil):
				t.Fatalf("error %v; want %v", err, tc.wantErr)
			}
			if decided != tc.decided || writes != tc.writes || len(rec.Events) != tc.events {
				t.Fatalf("decided %v, %d writes, %d events; want %v, %d, %d", decided, writes, len(rec.Events), tc.decided, tc.writes, tc.events)
			}
			got := &corev1.Pod{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(stored), got); err != nil {
				t.Fatal(err)
			}
			if want := tc.wantPhase; want != "" && got.Status.Phase != want {
				t.Fatalf("stored phase %s; want %s", got.Status.Phase, want)
			}
		})
	}
}

// TestDecided: a decision is a change exactly when the new status differs
// from the stored one.
func TestDecided(t *testing.T) {
	old := corev1.PodStatus{Phase: corev1.PodPending}
	if d := Decided(old, corev1.PodStatus{Phase: corev1.PodPending}, nil, nil); d.Changed {
		t.Fatal("an equal status is a change")
	}
	if d := Decided(old, corev1.PodStatus{Phase: corev1.PodFailed}, nil, nil); !d.Changed || d.Status.Phase != corev1.PodFailed {
		t.Fatalf("decision %+v", d)
	}
}
