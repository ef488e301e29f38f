package workspace

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	pt "github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

// world is the cluster a Workspace decision reads: a few namespaces with
// their labels, and another Workspace that may claim one of them.
type world struct {
	ws         *omniav1.Workspace
	other      *omniav1.Workspace // nil when it does not exist
	namespaces map[string]*corev1.Namespace
}

var namespacePool = []string{"team-a", "team-b", "team-c"}

// snapshot reads the world as Reconciler.snapshot does.
func (w *world) snapshot(now metav1.Time) Snapshot {
	s := Snapshot{Workspace: w.ws.DeepCopy(), Now: now}
	if ns := w.namespaces[w.ws.Spec.Namespace.Name]; ns != nil {
		s.Namespace = ns.DeepCopy()
		if owner := ns.Labels[omniav1.LabelWorkspace]; owner != "" && owner != w.ws.Name && w.other != nil && w.other.Name == owner {
			s.Claimant = w.other.DeepCopy()
		}
	}
	for _, n := range namespacePool {
		if ns := w.namespaces[n]; ns != nil && ns.Labels[omniav1.LabelWorkspace] == w.ws.Name {
			s.Labelled = append(s.Labelled, n)
		}
	}
	return s
}

// apply carries out a decision's writes as Reconciler.apply does, and
// stores the status when it changed.
func (w *world) apply(d Decision) error {
	if d.Create != nil {
		if w.namespaces[d.Create.Name] != nil {
			return fmt.Errorf("create of namespace %s, which exists", d.Create.Name)
		}
		w.namespaces[d.Create.Name] = d.Create.DeepCopy()
	}
	if d.Label {
		ns := w.namespaces[w.ws.Spec.Namespace.Name]
		if ns == nil {
			return fmt.Errorf("label asked for on a missing namespace")
		}
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[omniav1.LabelWorkspace] = w.ws.Name
	}
	for _, n := range d.Release {
		if ns := w.namespaces[n]; ns != nil && ns.Labels[omniav1.LabelWorkspace] == w.ws.Name {
			delete(ns.Labels, omniav1.LabelWorkspace)
		}
	}
	if d.Changed {
		st, err := pt.Stored(d.Status)
		if err != nil {
			return err
		}
		w.ws.Status = st
	}
	return nil
}

// TestDecideProperties checks Decide on random worlds: a Workspace naming
// one of a few namespaces, each missing, unlabelled, labelled for it or
// for another Workspace (live, deleted, moved on, or being deleted), or
// terminating, and a random stored status:
//
//   - no input makes it panic, and it leaves its input as it was;
//   - the same input gives the same decision;
//   - the phase and the NamespaceReady condition agree (Ready: owned,
//     Failed: claimed by a live Workspace, Pending: terminating), a
//     namespace is created only when missing and labelled only when it
//     exists unclaimed, and only namespaces the Workspace no longer names
//     are released;
//   - once its writes are carried out and its status stored, the next pass
//     asks for nothing: no create, label, release, event or status write.
func TestDecideProperties(t *testing.T) {
	counts := pt.Counts{}
	pt.Run(t, func(r *rand.Rand) error {
		w := genWorld(r)
		now := pt.MetaTime(r)
		// The world is not written until apply: reading it again gives an
		// equal snapshot sharing no memory.
		s, fresh := w.snapshot(now), func(Snapshot) Snapshot { return w.snapshot(now) }
		d, err := pt.Decide(s, fresh, Decide, func(a, b Decision) bool { return equality.Semantic.DeepEqual(a, b) })
		if err != nil {
			return err
		}
		if err := checkDecision(s, d); err != nil {
			return err
		}
		if err := w.apply(d); err != nil {
			return err
		}
		next := Decide(w.snapshot(pt.Later(r, now, time.Hour)))
		if next.Create != nil || next.Label || len(next.Release) > 0 || len(next.Events) > 0 || next.Changed {
			return fmt.Errorf("the pass after the writes is not a fixed point: create %v, label %v, release %v, events %v, status %s",
				next.Create != nil, next.Label, next.Release, next.Events, pt.Diff(w.ws.Status, next.Status))
		}
		counts.Add("phase " + string(d.Status.Phase))
		for what, did := range map[string]bool{"create": d.Create != nil, "label": d.Label, "release": len(d.Release) > 0, "event": len(d.Events) > 0, "status write": d.Changed} {
			if did {
				counts.Add(what)
			}
		}
		return nil
	})
	counts.Require(t, 0.02, "phase Ready", "phase Failed", "phase Pending", "create", "label", "release", "event", "status write")
}

func checkDecision(s Snapshot, d Decision) error {
	name := s.Workspace.Spec.Namespace.Name
	c := meta.FindStatusCondition(d.Status.Conditions, omniav1.ConditionNamespaceReady)
	if c == nil || c.ObservedGeneration != s.Workspace.Generation {
		return fmt.Errorf("NamespaceReady = %+v, want it set for generation %d", c, s.Workspace.Generation)
	}
	want := map[omniav1.WorkspacePhase][2]string{
		omniav1.WorkspacePhaseReady:   {string(metav1.ConditionTrue), omniav1.ReasonNamespaceOwned},
		omniav1.WorkspacePhaseFailed:  {string(metav1.ConditionFalse), omniav1.ReasonNamespaceClaimed},
		omniav1.WorkspacePhasePending: {string(metav1.ConditionFalse), omniav1.ReasonNamespaceTerminating},
	}[d.Status.Phase]
	if string(c.Status) != want[0] || c.Reason != want[1] {
		return fmt.Errorf("phase %q with NamespaceReady %s/%s", d.Status.Phase, c.Status, c.Reason)
	}
	if d.Create != nil && (s.Namespace != nil || d.Create.Name != name || d.Create.Labels[omniav1.LabelWorkspace] != s.Workspace.Name) {
		return fmt.Errorf("create %+v with namespace %v present", d.Create.ObjectMeta, s.Namespace != nil)
	}
	if (d.Create != nil || d.Label) && d.Status.Phase != omniav1.WorkspacePhaseReady {
		return fmt.Errorf("writes a namespace in phase %s", d.Status.Phase)
	}
	if d.Label && (s.Namespace == nil || s.Namespace.Labels[omniav1.LabelWorkspace] == s.Workspace.Name) {
		return fmt.Errorf("labels a namespace that is missing or already labelled")
	}
	if slices.Contains(d.Release, name) || !sort.StringsAreSorted(d.Release) {
		return fmt.Errorf("release %v for namespace %s", d.Release, name)
	}
	if d.Changed == equality.Semantic.DeepEqual(d.Status, s.Workspace.Status) {
		return fmt.Errorf("changed %v, but the status differs: %v", d.Changed, !d.Changed)
	}
	return nil
}

// genWorld draws a Workspace, the namespaces of the pool in random states
// and another Workspace that may claim the same one.
func genWorld(r *rand.Rand) *world {
	w := &world{namespaces: map[string]*corev1.Namespace{}}
	w.ws = &omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Generation: int64(1 + r.IntN(4))},
		Spec: omniav1.WorkspaceSpec{Namespace: omniav1.WorkspaceNamespace{Name: pt.Pick(r, namespacePool...)}}}
	if pt.Chance(r, 0.6) {
		w.other = &omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "beta"},
			Spec: omniav1.WorkspaceSpec{Namespace: omniav1.WorkspaceNamespace{Name: pt.Pick(r, namespacePool...)}}}
		if pt.Chance(r, 0.5) {
			w.other.Spec.Namespace.Name = w.ws.Spec.Namespace.Name // a contested namespace
		}
		if pt.Chance(r, 0.2) {
			w.other.DeletionTimestamp = pt.MaybeTime(r, 1)
			w.other.Finalizers = []string{"x"}
		}
	}
	for _, n := range namespacePool {
		if pt.Chance(r, 0.3) {
			continue
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/metadata.name": n}}}
		switch r.IntN(4) {
		case 0:
			ns.Labels[omniav1.LabelWorkspace] = "alpha"
		case 1:
			ns.Labels[omniav1.LabelWorkspace] = pt.Pick(r, "beta", "beta", "gone")
		case 2:
			ns.Labels[omniav1.LabelWorkspace] = ""
		}
		if pt.Chance(r, 0.1) {
			ns.DeletionTimestamp = pt.MaybeTime(r, 1)
		}
		w.namespaces[n] = ns
	}
	switch r.IntN(3) {
	case 0:
	case 1:
		w.ws.Status = omniav1.WorkspaceStatus{
			Phase:              pt.Pick(r, omniav1.WorkspacePhasePending, omniav1.WorkspacePhaseReady, omniav1.WorkspacePhaseFailed, ""),
			ObservedGeneration: int64(r.IntN(4)),
			Conditions:         pt.Conditions(r, 0.7, omniav1.ConditionNamespaceReady, "SomeOtherCondition"),
		}
	default:
		// What an earlier pass decided, maybe for an older generation.
		prev := w.snapshot(pt.MetaTime(r))
		if pt.Chance(r, 0.5) && prev.Workspace.Generation > 1 {
			prev.Workspace.Generation--
		}
		w.ws.Status = Decide(prev).Status
	}
	w.ws = pt.Cached(w.ws)
	return w
}
