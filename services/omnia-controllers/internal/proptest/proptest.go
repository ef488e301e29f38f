// Package proptest runs the property tests of the controllers' pure
// decision code: each property is checked on thousands of random inputs,
// every input drawn from its own seeded generator, so a failure names the
// one seed that reproduces it (OMNIA_PROPERTY_SEED=<seed> reruns only that
// input). The helpers here are the parts every controller's generator
// shares: picking values, times and durations the way the API server and
// the reconcilers produce them, and storing a status the way the API
// server does; and, in Status, the properties every status-only decision
// promises.
package proptest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Iterations is how many random inputs a property sees. Each iteration is
// a handful of pure function calls, so a property stays well under a
// second on a loaded machine while still reaching rare combinations.
const Iterations = 5000

// SeedEnv names the environment variable that reruns a single seed, the
// one a failure reported.
const SeedEnv = "OMNIA_PROPERTY_SEED"

// salt is the PCG stream; fixed, so a seed names the same input on every
// machine and every run.
const salt = 0x6f6d6e6961

// Run checks a property on Iterations inputs. check draws its input from r
// and returns a description of the first violation, or nil. A violation or
// a panic fails the test with the seed that produced it.
func Run(t *testing.T, check func(r *rand.Rand) error) {
	t.Helper()
	seeds := make([]uint64, 0, Iterations)
	if s := os.Getenv(SeedEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q is not a seed", SeedEnv, s)
		}
		seeds = append(seeds, n)
	} else {
		for i := range uint64(Iterations) {
			seeds = append(seeds, i+1)
		}
	}
	for _, seed := range seeds {
		if err := checkOne(seed, check); err != nil {
			t.Fatalf("seed %d (rerun with %s=%d): %v", seed, SeedEnv, seed, err)
		}
	}
}

// checkOne runs check for one seed, turning a panic into an error so the
// seed is reported with it.
func checkOne(seed uint64, check func(r *rand.Rand) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return check(rand.New(rand.NewPCG(seed, salt)))
}

// Counts tallies the outcomes the generated inputs reached, so a test can
// show that its properties were not checked on one easy case only.
type Counts map[string]int

// Add counts one input that reached outcome.
func (c Counts) Add(outcome string) { c[outcome]++ }

// Require logs every count and fails t when one of outcomes was reached by
// less than frac of the inputs.
func (c Counts) Require(t *testing.T, frac float64, outcomes ...string) {
	t.Helper()
	total := 0
	for _, n := range c {
		total += n
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-48s %6d", k, c[k])
	}
	t.Logf("outcomes:%s", b.String())
	if os.Getenv(SeedEnv) != "" {
		return // one seed reaches one outcome
	}
	var bad []string
	for _, o := range outcomes {
		if float64(c[o]) < frac*float64(Iterations) {
			bad = append(bad, fmt.Sprintf("%s (%d)", o, c[o]))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("the generator reached too few inputs (under %.1f%% of %d) with outcome %s", 100*frac, Iterations, strings.Join(bad, ", "))
	}
}

// Chance reports true with probability p.
func Chance(r *rand.Rand, p float64) bool { return r.Float64() < p }

// Pick returns one of xs.
func Pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }

// MaybePtr returns a pointer to v with probability p, else nil: an
// optional field left unset.
func MaybePtr[T any](r *rand.Rand, p float64, v T) *T {
	if Chance(r, p) {
		return &v
	}
	return nil
}

// Epoch is the base of generated times; any fixed instant does.
var Epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// Time returns a time within a day of Epoch, at second precision: the
// precision of every time the API server stores and of the clock the
// reconcilers read (truncated to the second).
func Time(r *rand.Rand) time.Time {
	return Epoch.Add(time.Duration(r.IntN(2*86400)-86400) * time.Second)
}

// MetaTime is Time as a metav1.Time.
func MetaTime(r *rand.Rand) metav1.Time { return metav1.NewTime(Time(r)) }

// MaybeTime is a MetaTime pointer, nil with probability 1-p.
func MaybeTime(r *rand.Rand, p float64) *metav1.Time {
	if !Chance(r, p) {
		return nil
	}
	t := MetaTime(r)
	return &t
}

// Duration returns a duration a CRD field with the duration pattern and a
// minimum of 0 admits, from the edges (0, a nanosecond, a millisecond,
// fractions of a second) to hours, each about as likely as the others.
func Duration(r *rand.Rand) time.Duration {
	switch r.IntN(6) {
	case 0:
		return Pick(r, 0, time.Nanosecond, time.Microsecond, time.Millisecond, 999*time.Millisecond)
	case 1:
		return time.Duration(r.IntN(2000)) * time.Millisecond
	case 2:
		return time.Duration(1+r.IntN(120)) * time.Second
	case 3:
		return time.Duration(1+r.IntN(120))*time.Second + time.Duration(r.IntN(1000))*time.Millisecond
	case 4:
		return time.Duration(1+r.IntN(60)) * time.Minute
	}
	return time.Duration(1+r.IntN(48)) * time.Hour
}

// Condition returns a condition of type typ in a random state: any
// status, reason, message, generation and transition time. Stored
// statuses are generated with these, including states no controller
// writes.
func Condition(r *rand.Rand, typ string, reasons ...string) metav1.Condition {
	reasons = append(reasons, "Unknown", "SomethingElse")
	return metav1.Condition{
		Type:               typ,
		Status:             Pick(r, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown),
		Reason:             Pick(r, reasons...),
		Message:            Pick(r, "", "stale message", "left by an older version"),
		ObservedGeneration: int64(r.IntN(4)),
		LastTransitionTime: MetaTime(r),
	}
}

// Conditions returns a random subset of conditions of the given types, in
// a random order.
func Conditions(r *rand.Rand, p float64, types ...string) []metav1.Condition {
	var out []metav1.Condition
	for _, typ := range types {
		if Chance(r, p) {
			out = append(out, Condition(r, typ))
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Stored returns v as the API server stores and returns it: encoded to
// JSON and decoded again, so times lose sub-second precision and empty
// optional fields vanish. A status fed back into a decision goes through
// Stored, as the controller reads it back from the cache.
func Stored[T any](v T) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return out, err
	}
	err = json.Unmarshal(b, &out)
	return out, err
}

// Diff describes how two values differ, for a failure message; "" when
// they are deeply equal.
func Diff(want, got any) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	w, _ := json.MarshalIndent(want, "", " ")
	g, _ := json.MarshalIndent(got, "", " ")
	if string(w) == string(g) {
		return fmt.Sprintf("equal JSON, different Go values:\n%#v\n%#v", want, got)
	}
	wl, gl := strings.Split(string(w), "\n"), strings.Split(string(g), "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var a, b string
		if i < len(wl) {
			a = wl[i]
		}
		if i < len(gl) {
			b = gl[i]
		}
		if a != b {
			return fmt.Sprintf("first difference at line %d:\n- %s\n+ %s\nfirst:\n%s\nsecond:\n%s", i+1, a, b, w, g)
		}
	}
	return "values differ"
}
