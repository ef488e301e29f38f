package kubeutil

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestSetCondition(t *testing.T) {
	var conds []metav1.Condition
	t1 := metav1.NewTime(time.Unix(100, 0))
	t2 := metav1.NewTime(time.Unix(200, 0))
	if !SetCondition(&conds, 1, t1, "Ready", metav1.ConditionFalse, "Waiting", "m") {
		t.Fatal("a new condition is a change")
	}
	if SetCondition(&conds, 2, t2, "Ready", metav1.ConditionFalse, "Waiting", "m") {
		t.Fatal("same status, reason and message is no change")
	}
	if conds[0].ObservedGeneration != 2 || !conds[0].LastTransitionTime.Equal(&t1) {
		t.Fatalf("generation must follow, transition time must not: %+v", conds[0])
	}
	if !SetCondition(&conds, 2, t2, "Ready", metav1.ConditionTrue, "Done", "m") || !conds[0].LastTransitionTime.Equal(&t2) {
		t.Fatalf("a flip is a change with a new transition time: %+v", conds[0])
	}
}

func TestIgnoreConflict(t *testing.T) {
	if IgnoreConflict(apierrors.NewConflict(schema.GroupResource{Resource: "x"}, "n", errors.New("rv"))) != nil {
		t.Fatal("409 must be dropped")
	}
	if IgnoreConflict(errors.New("boom")) == nil {
		t.Fatal("other errors must stay")
	}
}
