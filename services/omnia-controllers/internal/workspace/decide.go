// Package workspace is the Workspace controller: it makes sure the
// namespace a Workspace names exists and carries the Workspace's label,
// refuses a namespace another Workspace already owns, and takes the label
// off namespaces the Workspace no longer names. It never deletes a
// namespace. Decide is pure; Reconciler reads the namespaces and writes.
package workspace

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Snapshot is everything one decision reads.
type Snapshot struct {
	// Workspace is the object being reconciled.
	Workspace *omniav1.Workspace
	// Namespace is the namespace of spec.namespace.name; nil when it does
	// not exist.
	Namespace *corev1.Namespace
	// Claimant is the Workspace the namespace's label names when that is
	// another Workspace and it exists; nil otherwise.
	Claimant *omniav1.Workspace
	// Labelled are the names of the namespaces labelled for this Workspace.
	Labelled []string
	// Now stamps condition transitions.
	Now metav1.Time
}

// Decision is what to write.
type Decision struct {
	// Create is the namespace to create; nil when none.
	Create *corev1.Namespace
	// Label asks for the Workspace's label on the existing namespace.
	Label bool
	// Release are namespaces to take the Workspace's label off: they are
	// labelled for it but it names another one.
	Release []string
	// Status is the complete desired status.
	Status omniav1.WorkspaceStatus
	// Changed reports whether Status differs from the stored one.
	Changed bool
	// Events are emitted once per condition transition.
	Events []kubeutil.Event
}

// Decide computes one Workspace's writes and status. A claim is live only
// while its Workspace still exists and names the namespace: a label left
// behind by a deleted or moved Workspace does not block a new owner.
// Nothing here asks for a timer: every input is watched.
func Decide(s Snapshot) Decision {
	ws := s.Workspace
	name := ws.Spec.Namespace.Name
	st := ws.Status.DeepCopy()
	st.ObservedGeneration = ws.Generation
	var d Decision
	for _, n := range s.Labelled {
		if n != name {
			d.Release = append(d.Release, n)
		}
	}
	sort.Strings(d.Release)
	set := func(status metav1.ConditionStatus, reason, msg string) bool {
		return kubeutil.SetCondition(&st.Conditions, ws.Generation, s.Now, omniav1.ConditionNamespaceReady, status, reason, msg)
	}
	ns := s.Namespace
	switch {
	case ns != nil && liveClaim(s.Claimant, name):
		msg := fmt.Sprintf("namespace %s belongs to Workspace %s", name, s.Claimant.Name)
		if set(metav1.ConditionFalse, omniav1.ReasonNamespaceClaimed, msg) {
			d.Events = append(d.Events, kubeutil.Event{Type: corev1.EventTypeWarning, Reason: omniav1.EventNamespaceClaimed, Message: msg})
		}
		st.Phase = omniav1.WorkspacePhaseFailed
	case ns != nil && ns.DeletionTimestamp != nil:
		// A terminating namespace cannot be labelled; its deletion is a
		// watch event that brings this Workspace back to create it anew.
		set(metav1.ConditionFalse, omniav1.ReasonNamespaceTerminating, fmt.Sprintf("namespace %s is being deleted", name))
		st.Phase = omniav1.WorkspacePhasePending
	default:
		if ns == nil {
			d.Create = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{omniav1.LabelWorkspace: ws.Name}}}
		} else {
			d.Label = ns.Labels[omniav1.LabelWorkspace] != ws.Name
		}
		set(metav1.ConditionTrue, omniav1.ReasonNamespaceOwned, fmt.Sprintf("namespace %s is labelled %s=%s", name, omniav1.LabelWorkspace, ws.Name))
		st.Phase = omniav1.WorkspacePhaseReady
	}
	d.Status = *st
	d.Changed = !equality.Semantic.DeepEqual(ws.Status, *st)
	return d
}

// liveClaim reports whether claimant, the Workspace a namespace's label
// names, still owns that namespace.
func liveClaim(claimant *omniav1.Workspace, namespace string) bool {
	return claimant != nil && claimant.DeletionTimestamp == nil && claimant.Spec.Namespace.Name == namespace
}
