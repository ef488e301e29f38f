package controller

import (
	"context"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// agentEvents returns the events.k8s.io/v1 Events regarding the Agent
// called name, by reason.
func agentEvents(t *testing.T, ns, name string) map[string]eventsv1.Event {
	t.Helper()
	list, err := env.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]eventsv1.Event{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "Agent" && e.Regarding.Name == name {
			if _, dup := out[e.Reason]; dup {
				t.Errorf("Agent %s: two %s Events", name, e.Reason)
			}
			out[e.Reason] = e
		}
	}
	return out
}

// TestTransitionsAreRecordedAsEvents drives two runs through a Station
// that runs one at a time: the second waits, then fails. Each transition
// is an Event regarding its Agent, recorded once: Queued is not repeated
// while the run waits, and no Event became a series of repeats.
func TestTransitionsAreRecordedAsEvents(t *testing.T) {
	ns := env.Namespace(t)
	_, m := startWith(t, ns, startOptions{record: true})
	mkStation(t, ns, "st", func(s *agentsv1alpha1.StationSpec) { s.MaxConcurrentRuns = 1 })
	mkAgent(t, ns, "first", "st")
	waitPhase(t, ns, "first", agentsv1alpha1.PhaseRunning)
	mkAgent(t, ns, "second", "st")
	eventually(t, "second to be queued", func() bool {
		a := getAgent(t, ns, "second")
		if a == nil {
			return false
		}
		c := meta.FindStatusCondition(a.Status.Conditions, agentsv1alpha1.ConditionStarted)
		return c != nil && c.Reason == agentsv1alpha1.ReasonQueued
	})
	// Every poll looks at the queued run again: let two go by.
	polls := counterValue(m.Resyncs)
	eventually(t, "two polls", func() bool { return counterValue(m.Resyncs) >= polls+2 })
	finishPod(t, ns, "agent-job-first", 0)
	first := waitPhase(t, ns, "first", agentsv1alpha1.PhaseSucceeded)
	waitPhase(t, ns, "second", agentsv1alpha1.PhaseRunning)
	finishPod(t, ns, "agent-job-second", 3)
	second := waitPhase(t, ns, "second", agentsv1alpha1.PhaseFailed)

	want := map[*agentsv1alpha1.Agent][]string{
		first:  {"Normal/Started", "Normal/Succeeded"},
		second: {"Normal/Queued", "Normal/Started", "Warning/Failed"},
	}
	for a, kinds := range want {
		var evs map[string]eventsv1.Event
		eventually(t, "the Events of "+a.Name, func() bool {
			evs = agentEvents(t, ns, a.Name)
			return len(evs) >= len(kinds)
		})
		if len(evs) != len(kinds) {
			t.Errorf("Agent %s has Events %v, want %v", a.Name, evs, kinds)
		}
		for _, k := range kinds {
			typ, reason, _ := strings.Cut(k, "/")
			e, ok := evs[reason]
			switch {
			case !ok:
				t.Errorf("Agent %s: no %s Event", a.Name, reason)
				continue
			case e.Type != typ:
				t.Errorf("Agent %s: %s is %s, want %s", a.Name, reason, e.Type, typ)
			case e.Regarding.APIVersion != agentsv1alpha1.GroupVersion.String() || e.Regarding.UID != a.UID || e.Regarding.Namespace != ns:
				t.Errorf("Agent %s: %s regards %+v", a.Name, reason, e.Regarding)
			case e.ReportingController != "agent-controller" || e.Action == "":
				t.Errorf("Agent %s: %s reported by %q with action %q", a.Name, reason, e.ReportingController, e.Action)
			case e.Series != nil:
				t.Errorf("Agent %s: %s recorded %d times", a.Name, reason, e.Series.Count)
			}
		}
	}
	if e := agentEvents(t, ns, "second")["Failed"]; e.Note != second.Status.FailureReason {
		t.Errorf("the Failed note %q is not the failure reason %q", e.Note, second.Status.FailureReason)
	}
	if e := agentEvents(t, ns, "first")["Started"]; e.Related == nil || e.Related.Kind != "Job" || e.Related.Name != "agent-job-first" {
		t.Errorf("Started relates to %+v, want the Job", e.Related)
	}
}
