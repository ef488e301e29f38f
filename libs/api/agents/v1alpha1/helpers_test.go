package v1alpha1

import "testing"

// defaulting is one rule of a getter that reads a stored field, default
// included: in is the stored value, want what the getter returns for it.
type defaulting[In any, Out comparable] struct {
	rule string
	in   In
	want Out
}

// checkDefaulting runs get on each case, in a subtest named after its
// rule.
func checkDefaulting[In any, Out comparable](t *testing.T, get func(In) Out, cases []defaulting[In, Out]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if got := get(c.in); got != c.want {
				t.Errorf("%v reads as %v, want %v", c.in, got, c.want)
			}
		})
	}
}
