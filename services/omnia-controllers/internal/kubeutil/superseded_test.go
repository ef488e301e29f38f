package kubeutil

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestSuperseded(t *testing.T) {
	at := func(name, rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	type wrote struct{ before, after string }
	cases := []struct {
		name  string
		wrote []wrote
		read  string
		stale bool
	}{
		{"an object never written is never stale", nil, "5", false},
		{"the version a write replaced is stale", []wrote{{"5", "6"}}, "5", true},
		{"the version a write made is current", []wrote{{"5", "6"}}, "6", false},
		{"every version the writes of a pass replaced is stale", []wrote{{"5", "6"}, {"6", "7"}}, "6", true},
		{"a later version written by someone else is current", []wrote{{"5", "6"}}, "9", false},
		{"a write that changed nothing supersedes nothing", []wrote{{"5", "5"}}, "5", false},
		{"a write of an object read without a version supersedes nothing", []wrote{{"", "6"}}, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s Superseded
			for _, w := range tc.wrote {
				s.Wrote(at("a", w.after), w.before)
			}
			if got := s.Stale(at("a", tc.read)); got != tc.stale {
				t.Fatalf("Stale(rv %s) = %v, want %v", tc.read, got, tc.stale)
			}
			if s.Stale(at("b", tc.read)) {
				t.Fatal("another object's writes made this one stale")
			}
		})
	}
}

func TestSupersededForgetsOnceCaughtUp(t *testing.T) {
	obj := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: rv}}
	}
	var s Superseded
	s.Wrote(obj("6"), "5")
	if s.Stale(obj("6")) {
		t.Fatal("the written version is current")
	}
	if s.Stale(obj("5")) {
		t.Fatal("a read past the write forgets it: an older version read later is a relist's, not a lag behind this write")
	}
	s.Wrote(obj("8"), "7")
	s.Forget(types.NamespacedName{Namespace: "ns", Name: "a"})
	if s.Stale(obj("7")) {
		t.Fatal("Forget dropped nothing")
	}
	if len(s.rvs) != 0 {
		t.Fatalf("%d objects still recorded", len(s.rvs))
	}
}
