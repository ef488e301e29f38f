package kubeutil

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStripCached(t *testing.T) {
	fields := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}
	annotations := map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}
	t.Run("a typed object loses its managedFields and keeps its annotations", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", ManagedFields: fields, Annotations: annotations}}
		out, err := stripCached(cm)
		if err != nil || out.(*corev1.ConfigMap).ManagedFields != nil || len(out.(*corev1.ConfigMap).Annotations) != 1 {
			t.Fatalf("got %+v, %v", out, err)
		}
	})
	t.Run("a metadata-only object loses its managedFields and annotations", func(t *testing.T) {
		pm := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "a", ManagedFields: fields, Annotations: annotations}}
		out, err := stripCached(pm)
		if err != nil || out.(*metav1.PartialObjectMetadata).ManagedFields != nil || out.(*metav1.PartialObjectMetadata).Annotations != nil {
			t.Fatalf("got %+v, %v", out, err)
		}
	})
	t.Run("anything else passes as it is", func(t *testing.T) {
		if out, err := stripCached("tombstone"); err != nil || out != "tombstone" {
			t.Fatalf("got %v, %v", out, err)
		}
	})
}
