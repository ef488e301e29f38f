package controller

import (
	"encoding/json"
	"strconv"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// addFinalizerPatch returns the JSON patch that adds the batch-cleanup
// finalizer and touches no other entry: an append when the list exists
// (entries others add concurrently survive); when it does not, a patch
// guarded by the resourceVersion, so a list created meanwhile is never
// overwritten. Nil when a already carries it.
func addFinalizerPatch(a *agentsv1alpha1.Agent) []byte {
	for _, f := range a.Finalizers {
		if f == agentsv1alpha1.BatchCleanupFinalizer {
			return nil
		}
	}
	var ops []jsonPatchOp
	if len(a.Finalizers) > 0 {
		ops = []jsonPatchOp{{Op: "add", Path: "/metadata/finalizers/-", Value: agentsv1alpha1.BatchCleanupFinalizer}}
	} else {
		ops = []jsonPatchOp{
			{Op: "test", Path: "/metadata/resourceVersion", Value: a.ResourceVersion},
			{Op: "add", Path: "/metadata/finalizers", Value: []string{agentsv1alpha1.BatchCleanupFinalizer}},
		}
	}
	b, _ := json.Marshal(ops) // plain strings: cannot fail
	return b
}

// removeFinalizerPatch returns the JSON patch that removes the
// batch-cleanup finalizer at the index a shows it at, after testing it is
// still there, so a list that shifted meanwhile fails the patch instead of
// losing someone else's entry. Nil when a does not carry it.
func removeFinalizerPatch(a *agentsv1alpha1.Agent) []byte {
	for i, f := range a.Finalizers {
		if f != agentsv1alpha1.BatchCleanupFinalizer {
			continue
		}
		path := "/metadata/finalizers/" + strconv.Itoa(i)
		b, _ := json.Marshal([]jsonPatchOp{
			{Op: "test", Path: path, Value: agentsv1alpha1.BatchCleanupFinalizer},
			{Op: "remove", Path: path},
		})
		return b
	}
	return nil
}
