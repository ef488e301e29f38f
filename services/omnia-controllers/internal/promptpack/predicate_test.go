package promptpack

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/event"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

func TestPhaseChanged(t *testing.T) {
	p := PhaseChanged()
	a := pack("a", "1.0.0", 0, omniav1.PromptPackPhasePending)
	b := a.DeepCopy()
	b.Status.Phase = omniav1.PromptPackPhaseActive
	c := b.DeepCopy()
	c.Status.Conditions = nil
	c.Status.LastUpdated = &t0
	if !p.Create(event.CreateEvent{Object: &a}) || !p.Delete(event.DeleteEvent{Object: &a}) || p.Generic(event.GenericEvent{Object: &a}) {
		t.Fatal("create/delete pass, generic does not")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: &a, ObjectNew: b}) {
		t.Fatal("a phase change passes")
	}
	if p.Update(event.UpdateEvent{ObjectOld: b, ObjectNew: c}) {
		t.Fatal("a write that keeps the phase must not re-enqueue siblings")
	}
}
