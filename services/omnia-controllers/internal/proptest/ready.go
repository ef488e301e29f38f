package proptest

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// ReadyWant is what a decide test expects of a status-only decision: the
// phase it decided and its Ready condition, both for the object's
// generation.
type ReadyWant[P ~string] struct {
	Gen        int64  // the object's generation
	Phase      P      // the decided phase
	ReadyPhase P      // the kind's ready phase: Ready is True in it, else False
	Reason     string // Ready's reason
	Msg        string // a part of Ready's message
}

// Check fails t unless a status in phase, observed for observed, with
// conds, is what w expects.
func (w ReadyWant[P]) Check(t testing.TB, phase P, observed int64, conds []metav1.Condition) {
	t.Helper()
	if phase != w.Phase || observed != w.Gen {
		t.Fatalf("phase %s observedGeneration %d; want %s, %d", phase, observed, w.Phase, w.Gen)
	}
	want := metav1.ConditionFalse
	if w.Phase == w.ReadyPhase {
		want = metav1.ConditionTrue
	}
	c := meta.FindStatusCondition(conds, omniav1.ConditionReady)
	if c == nil || c.Status != want || c.Reason != w.Reason || !strings.Contains(c.Message, w.Msg) || c.ObservedGeneration != w.Gen {
		t.Fatalf("Ready = %+v; want %s/%s containing %q for generation %d", c, want, w.Reason, w.Msg, w.Gen)
	}
}

// ReadyFor returns the Ready condition of a decided status, and an error
// unless both it and the status (observed, its observedGeneration) were
// written for the object's generation gen: what every status-only
// decision promises first, whatever it decided.
func ReadyFor(conds []metav1.Condition, observed, gen int64) (*metav1.Condition, error) {
	c := meta.FindStatusCondition(conds, omniav1.ConditionReady)
	if c == nil || c.ObservedGeneration != gen || observed != gen {
		return c, fmt.Errorf("condition Ready = %+v, observedGeneration %d; want both for generation %d", c, observed, gen)
	}
	return c, nil
}

// ReadyReason is the outcome of a kind whose Ready reason says what was
// decided, for Status.Outcomes: "reason <Ready's reason>".
func ReadyReason(conds []metav1.Condition) []string {
	return []string{"reason " + meta.FindStatusCondition(conds, omniav1.ConditionReady).Reason}
}
