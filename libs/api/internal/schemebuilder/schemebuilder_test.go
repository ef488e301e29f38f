package schemebuilder

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRegisteredKindsAreAddedWithTheGroupsMetaKinds(t *testing.T) {
	gv := schema.GroupVersion{Group: "example.agentplane.dev", Version: "v1"}
	b := &Builder{GroupVersion: gv}
	b.Register(&metav1.Status{})
	s := runtime.NewScheme()
	if err := b.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if !s.Recognizes(gv.WithKind("Status")) {
		t.Error("a registered kind is known in its group version")
	}
	if !s.Recognizes(gv.WithKind("ListOptions")) {
		t.Error("the group version's meta kinds (ListOptions, ...) are added too")
	}
}
