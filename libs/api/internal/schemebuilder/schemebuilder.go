// Package schemebuilder collects the kinds of one API group version so they
// can be added to a runtime.Scheme in one call. It keeps the API packages
// free of controller-runtime, so any client can import them with
// apimachinery alone.
package schemebuilder

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Builder collects the kinds of one group version.
type Builder struct {
	GroupVersion schema.GroupVersion
	objects      []runtime.Object
}

// Register records kinds to add to schemes; call it from init functions.
func (b *Builder) Register(objects ...runtime.Object) {
	b.objects = append(b.objects, objects...)
}

// AddToScheme adds every registered kind, with the group's meta kinds.
func (b *Builder) AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(b.GroupVersion, b.objects...)
	metav1.AddToGroupVersion(s, b.GroupVersion)
	return nil
}
