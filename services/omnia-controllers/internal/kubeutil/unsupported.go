package kubeutil

import (
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// UnsupportedField is one spec field the platform does not implement: its
// path as kubectl users write it, and whether a spec asks for it. A field
// that gets implemented loses its entry in its controller's table, and
// the Unsupported condition stops naming it.
type UnsupportedField[S any] struct {
	// Path names the field, such as "spec.evals" or
	// "spec.facades[].expose".
	Path string
	// Set reports whether the spec asks for what the field configures.
	Set func(*S) bool
}

// UnsupportedFields lists the paths of the table's fields that spec sets,
// sorted and without repeats, so the condition's message is the same on
// every pass over the same spec.
func UnsupportedFields[S any](table []UnsupportedField[S], spec *S) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range table {
		if !seen[f.Path] && f.Set(spec) {
			seen[f.Path] = true
			out = append(out, f.Path)
		}
	}
	sort.Strings(out)
	return out
}

// UnsupportedCondition is the Unsupported condition for the set fields
// paths: True with reason FieldsNotImplemented naming each, or False with
// AllFieldsSupported when there are none. False rather than absent, so
// kubectl shows that the check was made.
func UnsupportedCondition(paths []string) (status metav1.ConditionStatus, reason, msg string) {
	if len(paths) == 0 {
		return metav1.ConditionFalse, omniav1.ReasonAllFieldsSupported, "every field the spec sets is implemented"
	}
	return metav1.ConditionTrue, omniav1.ReasonFieldsNotImplemented,
		"set but not implemented by this platform, so they have no effect: " + strings.Join(paths, ", ")
}
