package kubeutil

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestEnqueueOldAndNew checks which objects' requests each event
// enqueues. The map sends a ConfigMap to the request named by its
// "target" label; moved compares the labels.
func TestEnqueueOldAndNew(t *testing.T) {
	cm := func(target string) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", Labels: map[string]string{"target": target}}}
	}
	mapTo := func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: o.GetLabels()["target"]}}}
	}
	moved := func(before, after client.Object) bool {
		return before.GetLabels()["target"] != after.GetLabels()["target"]
	}
	cases := []struct {
		name  string
		event string // create, update (from target a to b), delete or generic
		moved func(before, after client.Object) bool
		want  []string
	}{
		{name: "a create enqueues the object's requests", event: "create", moved: moved, want: []string{"a"}},
		{name: "a delete enqueues the object's requests", event: "delete", moved: moved, want: []string{"a"}},
		{name: "a generic event enqueues the object's requests", event: "generic", moved: moved, want: []string{"a"}},
		{name: "an update that moves the object enqueues the new object's requests and the old one's", event: "update", moved: moved,
			want: []string{"a", "b"}},
		{name: "an update that does not move the object maps only the new one", event: "update",
			moved: func(client.Object, client.Object) bool { return false }, want: []string{"b"}},
		{name: "with no moved, every update maps the old object too", event: "update", want: []string{"a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			h, ctx := EnqueueOldAndNew(mapTo, tc.moved), context.Background()
			switch tc.event {
			case "create":
				h.Create(ctx, event.CreateEvent{Object: cm("a")}, q)
			case "update":
				h.Update(ctx, event.UpdateEvent{ObjectOld: cm("a"), ObjectNew: cm("b")}, q)
			case "delete":
				h.Delete(ctx, event.DeleteEvent{Object: cm("a")}, q)
			case "generic":
				h.Generic(ctx, event.GenericEvent{Object: cm("a")}, q)
			}
			var got []string
			for q.Len() > 0 {
				req, _ := q.Get()
				got = append(got, req.Name)
				q.Done(req)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("enqueued %v, want %v", got, tc.want)
			}
		})
	}
}
