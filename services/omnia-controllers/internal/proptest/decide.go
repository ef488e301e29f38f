package proptest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Decide runs decide on in and checks the two properties every
// controller's decision promises on any input: it leaves its input as it
// was, and deciding again on an equal input gives the same decision.
// fresh returns an input equal to its argument that shares no memory
// decide could write (the snapshot with its object deep-copied); same
// tells whether two decisions are the same.
func Decide[S, D any](in S, fresh func(S) S, decide func(S) D, same func(a, b D) bool) (D, error) {
	before := fresh(in)
	d := decide(in)
	if !equality.Semantic.DeepEqual(before, in) {
		return d, fmt.Errorf("Decide changed its input: %s", Diff(before, in))
	}
	if again := decide(fresh(before)); !same(d, again) {
		return d, fmt.Errorf("two decisions on one input differ: %s", Diff(d, again))
	}
	return d, nil
}

// RunDecide checks a controller's decide on Iterations inputs gen draws:
// on each it keeps the promises Decide checks, then checks, in order
// until one fails, hold the decision to the controller's own properties
// (and count the outcome it reached). It is Run with the steps every controller's property test
// starts with written once.
func RunDecide[S, D any](t *testing.T, gen func(*rand.Rand) S, fresh func(S) S, decide func(S) D, same func(a, b D) bool,
	checks ...func(r *rand.Rand, s S, d D) error) {
	t.Helper()
	Run(t, func(r *rand.Rand) error {
		s := gen(r)
		d, err := Decide(s, fresh, decide, same)
		if err != nil {
			return err
		}
		for _, check := range checks {
			if err := check(r, s, d); err != nil {
				return err
			}
		}
		return nil
	})
}

// RunCounted is RunDecide for a property test that also shows what its
// generator reached: once every check holds on an input, count adds that
// input's outcomes to the Counts it returns, for Require. It spares each
// test the counter it would otherwise declare and close over.
func RunCounted[S, D any](t *testing.T, gen func(*rand.Rand) S, fresh func(S) S, decide func(S) D, same func(a, b D) bool,
	count func(c Counts, s S, d D), checks ...func(r *rand.Rand, s S, d D) error) Counts {
	t.Helper()
	counts := Counts{}
	RunDecide(t, gen, fresh, decide, same, append(slices.Clip(checks), func(_ *rand.Rand, s S, d D) error {
		count(counts, s, d)
		return nil
	})...)
	return counts
}

// Cached is obj as a reconciler reads it from the cache: stored as the
// API server stores it (Stored), in a new object. Generators end with it.
// An object that does not store is a bug of the generator, not of the
// decision under test, so it panics, and Run reports the failing input.
func Cached[T any](obj *T) *T {
	stored, err := Stored(*obj)
	if err != nil {
		panic(err)
	}
	return &stored
}

// Earlier sets a snapshot copied for an earlier pass to that pass: its
// clock now moves back by up to two hours, in whole seconds, and half
// the time obj, its own copy of the decided object, goes back one
// generation (never below the first). A generator decides on it to draw
// a status an earlier pass left.
func Earlier(r *rand.Rand, now *metav1.Time, obj metav1.Object) {
	*now = metav1.NewTime(now.Add(-time.Duration(r.IntN(7200)) * time.Second))
	if r.IntN(2) == 0 && obj.GetGeneration() > 1 {
		obj.SetGeneration(obj.GetGeneration() - 1)
	}
}

// Written is the status the next pass reads back: the decided one as the
// API server stores it when the decision writes it (changed), else old,
// the status already stored. The fixed-point properties decide again on
// it.
func Written[T any](decided, old T, changed bool) (T, error) {
	stored, err := Stored(decided)
	if err != nil || changed {
		return stored, err
	}
	return old, nil
}

// Later is the time of a later pass: a whole number of seconds, at least
// one and at most within, after now.
func Later(r *rand.Rand, now metav1.Time, within time.Duration) metav1.Time {
	return metav1.NewTime(now.Add(time.Duration(1+r.IntN(int(within/time.Second))) * time.Second))
}

// Settles checks the fixed point of a status controller: the status a
// pass decided, read back as stored (Written), needs no further write.
// again decides over the snapshot with stored as the object's status and
// a later clock, and returns that decision's status, whether it would
// write, and how many events it emits; either one fails the property.
func Settles[T any](decided, old T, changed bool, again func(stored T) (T, bool, int)) error {
	stored, err := Written(decided, old, changed)
	if err != nil {
		return err
	}
	if st, write, events := again(stored); write || events > 0 {
		return fmt.Errorf("the written status needs another write (%d events): %s", events, Diff(stored, st))
	}
	return nil
}

// AddWrite counts whether a first pass wrote its status.
func (c Counts) AddWrite(changed bool) {
	if changed {
		c.Add("status write")
	} else {
		c.Add("no status write")
	}
}
