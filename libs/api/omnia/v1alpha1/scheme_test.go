package v1alpha1

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}
