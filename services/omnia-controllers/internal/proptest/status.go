package proptest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Status is the decision of a controller whose only write is its
// object's status (kubeutil.ReconcileStatus), as its property test drives
// it: S is the snapshot, St the status.
type Status[S, St any] struct {
	// Fresh returns a snapshot equal to its argument that shares no memory
	// Decide could write (the object deep-copied).
	Fresh func(S) S
	// Decide is the controller's pure decision.
	Decide func(S) kubeutil.Outcome[St]
	// At points into s: the decided object, its status and the pass's
	// clock.
	At func(s *S) (obj metav1.Object, status *St, now *metav1.Time)
	// Outcomes names what a decided status counts as (its phase, its
	// Ready reason), for Counts.Require to show that the generator reached
	// each.
	Outcomes func(st St) []string
}

// Run checks Decide on Iterations snapshots gen draws. On each it checks
// what every status-only decision promises — it leaves its input as it
// was, the same input gives the same decision, an event goes with a
// status write, Changed reports exactly that the status differs from the
// stored one, and the written status, decided on again later, needs no
// write and emits nothing — then check holds the decision to the
// controller's own properties. It returns the outcomes reached: the
// Outcomes of each decided status, and whether it was written ("status
// write", "no status write").
func (c Status[S, St]) Run(t *testing.T, gen func(*rand.Rand) S, check func(s S, d kubeutil.Outcome[St]) error) Counts {
	t.Helper()
	counts := Counts{}
	RunDecide(t, gen, c.Fresh, c.Decide, SameOutcome[St], func(r *rand.Rand, s S, d kubeutil.Outcome[St]) error {
		if err := check(s, d); err != nil {
			return err
		}
		_, old, now := c.At(&s)
		if len(d.Events) > 0 && !d.Changed {
			return fmt.Errorf("%d events without a status change", len(d.Events))
		}
		if d.Changed == equality.Semantic.DeepEqual(d.Status, *old) {
			return fmt.Errorf("changed %v, but the status differs: %v", d.Changed, !d.Changed)
		}
		if err := Settles(d.Status, *old, d.Changed, func(stored St) (St, bool, int) {
			next := c.Fresh(s)
			_, st, at := c.At(&next)
			*st, *at = stored, Later(r, *now, time.Hour)
			again := c.Decide(next)
			return again.Status, again.Changed, len(again.Events)
		}); err != nil {
			return err
		}
		for _, o := range c.Outcomes(d.Status) {
			counts.Add(o)
		}
		counts.AddWrite(d.Changed)
		return nil
	})
	return counts
}

// Prior gives the object of s the status it arrives with, each about as
// often: none, random() (a state the controller may never write), or
// what an earlier pass decided, half the time for the previous
// generation. The object is then stored as the API server would
// (Stored), in place.
func (c Status[S, St]) Prior(r *rand.Rand, s *S, random func() St) {
	obj, st, _ := c.At(s)
	switch r.IntN(3) {
	case 0:
	case 1:
		*st = random()
	default:
		prev := c.Fresh(*s)
		if o, _, _ := c.At(&prev); Chance(r, 0.5) && o.GetGeneration() > 1 {
			o.SetGeneration(o.GetGeneration() - 1)
		}
		*st = c.Decide(prev).Status
	}
	if err := storeInPlace(obj); err != nil {
		panic(err)
	}
}

// storeInPlace replaces *obj with Stored(*obj), for obj of any pointer
// type.
func storeInPlace(obj any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	v := reflect.ValueOf(obj).Elem()
	out := reflect.New(v.Type())
	if err := json.Unmarshal(b, out.Interface()); err != nil {
		return err
	}
	v.Set(out.Elem())
	return nil
}

// SameOutcome tells whether two status-only decisions are the same: the
// same status, write, events, and a retry or none.
func SameOutcome[St any](a, b kubeutil.Outcome[St]) bool {
	return equality.Semantic.DeepEqual(a.Status, b.Status) && a.Changed == b.Changed &&
		equality.Semantic.DeepEqual(a.Events, b.Events) && (a.Retry == nil) == (b.Retry == nil)
}
