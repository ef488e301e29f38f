package workspace

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

var t0 = metav1.NewTime(proptest.Epoch)

func ws(name, ns string) *omniav1.Workspace {
	return &omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 2},
		Spec: omniav1.WorkspaceSpec{Namespace: omniav1.WorkspaceNamespace{Name: ns}}}
}

func namespace(name, owner string) *corev1.Namespace {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if owner != "" {
		n.Labels = map[string]string{omniav1.LabelWorkspace: owner}
	}
	return n
}

// TestDecide has a case per rule of the Workspace controller.
func TestDecide(t *testing.T) {
	terminating := namespace("team-a", "")
	terminating.DeletionTimestamp = &t0
	deleted := ws("other", "team-a")
	deleted.DeletionTimestamp = &t0
	type want struct {
		create  bool
		label   bool
		release []string
		phase   omniav1.WorkspacePhase
		reason  string
		event   bool
	}
	cases := []struct {
		name string
		s    Snapshot
		want want
	}{
		{"a missing namespace is created, carrying the label",
			Snapshot{Workspace: ws("a", "team-a")},
			want{create: true, phase: omniav1.WorkspacePhaseReady, reason: omniav1.ReasonNamespaceOwned}},
		{"an existing unlabelled namespace is labelled",
			Snapshot{Workspace: ws("a", "team-a"), Namespace: namespace("team-a", "")},
			want{label: true, phase: omniav1.WorkspacePhaseReady, reason: omniav1.ReasonNamespaceOwned}},
		{"a namespace already labelled for this Workspace needs no write",
			Snapshot{Workspace: ws("a", "team-a"), Namespace: namespace("team-a", "a"), Labelled: []string{"team-a"}},
			want{phase: omniav1.WorkspacePhaseReady, reason: omniav1.ReasonNamespaceOwned}},
		{"a namespace owned by another live Workspace is refused: Failed, no write",
			Snapshot{Workspace: ws("a", "team-a"), Namespace: namespace("team-a", "other"), Claimant: ws("other", "team-a")},
			want{phase: omniav1.WorkspacePhaseFailed, reason: omniav1.ReasonNamespaceClaimed, event: true}},
		{"a label left by a Workspace that now names another namespace is taken over",
			Snapshot{Workspace: ws("a", "team-a"), Namespace: namespace("team-a", "other"), Claimant: ws("other", "team-b")},
			want{label: true, phase: omniav1.WorkspacePhaseReady, reason: omniav1.ReasonNamespaceOwned}},
		{"a label naming a Workspace that does not exist is taken over",
			Snapshot{Workspace: ws("a", "team-a"), Namespace: namespace("team-a", "gone")},
			want{label: true, phase: omniav1.WorkspacePhaseReady, reason: omniav1.ReasonNamespaceOwned}},
		{"a label naming a Workspace being deleted is taken over",
			Snapshot{Workspace: ws("a", "team-a"), Namespace: namespace("team-a", "other"), Claimant: deleted},
			want{label: true, phase: omniav1.WorkspacePhaseReady, reason: omniav1.ReasonNamespaceOwned}},
		{"a terminating namespace waits: Pending, no write",
			Snapshot{Workspace: ws("a", "team-a"), Namespace: terminating},
			want{phase: omniav1.WorkspacePhasePending, reason: omniav1.ReasonNamespaceTerminating}},
		{"a namespace the Workspace no longer names is released, never deleted",
			Snapshot{Workspace: ws("a", "team-b"), Namespace: namespace("team-b", ""), Labelled: []string{"team-a"}},
			want{label: true, release: []string{"team-a"}, phase: omniav1.WorkspacePhaseReady, reason: omniav1.ReasonNamespaceOwned}},
		{"a refused Workspace still releases the namespaces it left",
			Snapshot{Workspace: ws("a", "team-b"), Namespace: namespace("team-b", "other"), Claimant: ws("other", "team-b"), Labelled: []string{"team-a"}},
			want{release: []string{"team-a"}, phase: omniav1.WorkspacePhaseFailed, reason: omniav1.ReasonNamespaceClaimed, event: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.Now = t0
			d := Decide(tc.s)
			if (d.Create != nil) != tc.want.create {
				t.Fatalf("create = %+v, want %v", d.Create, tc.want.create)
			}
			if d.Create != nil && (d.Create.Name != "team-a" || d.Create.Labels[omniav1.LabelWorkspace] != "a" || len(d.Create.OwnerReferences) != 0) {
				t.Fatalf("created namespace %+v; want team-a labelled for a and not owned (GC must never delete it)", d.Create.ObjectMeta)
			}
			if d.Label != tc.want.label {
				t.Fatalf("label = %v, want %v", d.Label, tc.want.label)
			}
			if !reflect.DeepEqual(d.Release, tc.want.release) {
				t.Fatalf("release = %v, want %v", d.Release, tc.want.release)
			}
			c := meta.FindStatusCondition(d.Status.Conditions, omniav1.ConditionNamespaceReady)
			if d.Status.Phase != tc.want.phase || c == nil || c.Reason != tc.want.reason || c.ObservedGeneration != 2 {
				t.Fatalf("phase %q NamespaceReady %+v; want %q %s", d.Status.Phase, c, tc.want.phase, tc.want.reason)
			}
			if d.Status.ObservedGeneration != 2 || !d.Changed {
				t.Fatalf("observedGeneration %d changed %v", d.Status.ObservedGeneration, d.Changed)
			}
			if got := len(d.Events) == 1 && d.Events[0].Reason == omniav1.EventNamespaceClaimed; got != tc.want.event {
				t.Fatalf("events %+v, want a NamespaceClaimed event: %v", d.Events, tc.want.event)
			}
		})
	}
}

// TestDecideSteadyState: a second pass over the status the first one
// wrote changes nothing and emits no event again, so the controller's own
// status write does not loop and a refusal is announced once.
func TestDecideSteadyState(t *testing.T) {
	for name, s := range map[string]Snapshot{
		"owned":   {Workspace: ws("a", "team-a"), Namespace: namespace("team-a", "a"), Labelled: []string{"team-a"}},
		"refused": {Workspace: ws("a", "team-a"), Namespace: namespace("team-a", "other"), Claimant: ws("other", "team-a")},
	} {
		t.Run(name, func(t *testing.T) {
			s.Now = t0
			first := Decide(s)
			s.Workspace.Status = first.Status
			s.Now = metav1.NewTime(t0.Add(time.Hour))
			second := Decide(s)
			if second.Changed || len(second.Events) != 0 {
				t.Fatalf("second pass changed %v events %+v", second.Changed, second.Events)
			}
		})
	}
}
