package batch

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tests/internal/runs"
)

// selectedIDs returns the ids of the payloads a sink with output.select
// gets for a run whose stream holds evs, by the rule docs/events.md and the
// AgentDefinition API state: the run's own events (lifecycle, batch) always
// pass, and a CLI line is sent once, under its first event's id, when keep
// passes any of the line's events.
func selectedIDs(evs []*eventsv1.RunEvent, keep func(*eventsv1.RunEvent) bool) (ids []string, dropped int) {
	for i := 0; i < len(evs); {
		ev := evs[i]
		if !events.IsCLIEvent(ev) {
			ids = append(ids, ev.GetId())
			i++
			continue
		}
		// Only a line's first event carries the line; the events after it
		// without one came from the same line.
		j := i + 1
		for j < len(evs) && events.IsCLIEvent(evs[j]) && len(evs[j].GetRaw()) == 0 {
			j++
		}
		if slices.ContainsFunc(evs[i:j], keep) {
			ids = append(ids, ev.GetId())
		} else {
			dropped++
		}
		i = j
	}
	return ids, dropped
}

// TestOutputSelectFiltersWhatABatchRunsSinksGet: a batch run's events go to
// its definition's http sinks through output.select like a Job run's: the
// CLI lines holding a selected event, each once, and every lifecycle event;
// the platform stream still holds all of them.
func TestOutputSelectFiltersWhatABatchRunsSinksGet(t *testing.T) {
	ns := namespace(t)
	s := newSink(t)
	kind := func(k eventsv1.EventKind) func(*eventsv1.RunEvent) bool {
		return func(ev *eventsv1.RunEvent) bool { return ev.GetKind() == k }
	}
	cases := []struct {
		rule  string
		agent string
		sel   []agentsv1alpha1.OutputSelector
		// keep says which events the selectors pass, written from the
		// documented rule, independently of libs/sinks.
		keep func(*eventsv1.RunEvent) bool
		// cliLines is how many CLI lines the sink must get, so a rule
		// that passes nothing, or everything, is not mistaken for one
		// that works.
		cliLines int
		// lineType is the vendor's own "type" field each CLI line sent
		// carries, as a receiver matching on it sees.
		lineType string
	}{
		{"an event kind passes only the lines holding that kind", "only-result",
			[]agentsv1alpha1.OutputSelector{{Event: agentsv1alpha1.SelectResult}},
			kind(eventsv1.EventKind_EVENT_KIND_RESULT), 1, "result"},
		{"a message selector passes the model's message", "only-message",
			[]agentsv1alpha1.OutputSelector{{Event: agentsv1alpha1.SelectMessage}},
			kind(eventsv1.EventKind_EVENT_KIND_MESSAGE), 1, "assistant"},
		{"contains passes an event holding the text", "message-with-topic",
			[]agentsv1alpha1.OutputSelector{{Event: agentsv1alpha1.SelectMessage, Contains: "tides"}},
			func(ev *eventsv1.RunEvent) bool {
				return ev.GetKind() == eventsv1.EventKind_EVENT_KIND_MESSAGE && strings.Contains(ev.GetMessage().GetText(), "tides")
			}, 1, "assistant"},
		{"contains drops every event lacking the text, lifecycle events still pass", "no-match",
			[]agentsv1alpha1.OutputSelector{{Event: agentsv1alpha1.SelectMessage, Contains: "not in the answer"}},
			func(*eventsv1.RunEvent) bool { return false }, 0, ""},
	}
	for _, c := range cases {
		recipe(t, ns, c.agent, recipeOpts{sinkURL: s.URL, mutate: func(d *agentsv1alpha1.AgentDefinitionSpec) {
			d.Output.Select = c.sel
		}})
		launch(t, ns, c.agent, c.agent, "")
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			a := waitFor(t, ns, c.agent, 60*time.Second, "terminal", terminal)
			if a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
				t.Fatalf("phase %s reason %q", a.Status.Phase, a.Status.FailureReason)
			}
			if got := s.waitLifecycles(t, c.agent, 2); !slices.Equal(got, []string{"agent/started", "agent/succeeded"}) {
				t.Fatalf("the sink got lifecycle events %v, want agent/started and agent/succeeded", got)
			}
			stored := runs.Stored(t, suite.NATSURL, ns, c.agent, natsOpts...)
			want, dropped := selectedIDs(stored, c.keep)
			if dropped == 0 {
				t.Fatalf("every CLI line of the stream is selected, so the filter cannot be seen: %d events", len(stored))
			}
			var sent []string
			cli := 0
			for _, p := range s.Of(c.agent) {
				sent = append(sent, p.ID)
				if _, ok := p.Lifecycle(); ok {
					continue
				}
				cli++
				var line struct{ Type string }
				if err := json.Unmarshal(p.Event, &line); err != nil || line.Type != c.lineType {
					t.Errorf("payload %s carries line %s, want a %q line", p.ID, p.Event, c.lineType)
				}
			}
			if !slices.Equal(sent, want) {
				t.Errorf("the sink got %v, want the selected lines and the lifecycle events of the stream, once each, in order: %v", sent, want)
			}
			if cli != c.cliLines {
				t.Errorf("the sink got %d CLI lines, want %d", cli, c.cliLines)
			}
		})
	}
}
