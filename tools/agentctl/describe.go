package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tools/agentctl/digest"
)

// runEventsTimeout bounds reading an Agent's run events for describe, so
// a slow NATS delays the rest of the output by at most this.
const runEventsTimeout = 10 * time.Second

func newDescribeCmd(g *globals) *cobra.Command {
	var runEvents int
	cmd := &cobra.Command{
		Use:   "describe [KIND] NAME",
		Short: "Show one object in detail: status, conditions, Kubernetes Events and an Agent's last run events",
		Long: `Show one object in detail: its spec and status fields, its conditions, the
Kubernetes Events about it and, for an Agent, its last run events from NATS
(--events; a NATS that cannot be reached is noted in one line).

KIND is agents (the default), agentruntimes (ar), promptpacks (pp) or
toolregistries (tr).`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: g.completeKindAndName,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, name := agentKind, args[0]
			if len(args) == 2 {
				var ok bool
				if k, ok = lookupKind(args[0]); !ok {
					return unknownKind(args[0])
				}
				name = args[1]
			}
			if runEvents < 0 {
				return &exitCodeError{code: exitUsage, msg: fmt.Sprintf("--events %d: want 0 or more", runEvents)}
			}
			cl, err := g.clients()
			if err != nil {
				return err
			}
			obj, err := cl.get(cmd.Context(), k, name)
			if err != nil {
				return err
			}
			return describe(cmd.Context(), cmd.OutOrStdout(), g, cl, k, obj, runEvents, time.Now())
		},
	}
	cmd.Flags().IntVar(&runEvents, "events", 10, "how many of an Agent's last run events to read from NATS (0: none)")
	return cmd
}

// describe prints obj: who it is, its fields, the kind's sections, its
// conditions, its Kubernetes Events and, for an Agent, its last run events.
func describe(ctx context.Context, out io.Writer, g *globals, cl *clients, k *kind, obj client.Object, runEvents int, now time.Time) error {
	created := obj.GetCreationTimestamp()
	head := []field{
		{"Name", obj.GetName()},
		{"Namespace", obj.GetNamespace()},
		{"Kind", k.gvk.Kind + " (" + k.gvk.GroupVersion().String() + ")"},
		{"Created", timeText(&created, now)},
	}
	fs, sections := k.describe(obj, now)
	writeFields(out, append(head, fs...))
	sections = append(sections, conditionsSection(k.conditions(obj), now))
	for _, s := range sections {
		writeSection(out, s)
	}
	evs, err := kubeEvents(ctx, cl, obj, now)
	if err != nil {
		fmt.Fprintf(out, "Events: cannot be listed: %s\n", clean(err.Error()))
	} else {
		writeSection(out, evs)
	}
	if a, ok := obj.(*agentsv1alpha1.Agent); ok && runEvents > 0 {
		describeRunEvents(ctx, out, g, a, runEvents)
	}
	return nil
}

// writeFields prints "Label:  value" lines, aligned; values are cleaned.
func writeFields(out io.Writer, fs []field) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, f := range fs {
		fmt.Fprintf(tw, "%s:\t%s\n", f.label, clean(f.value))
	}
	_ = tw.Flush()
}

// writeSection prints a titled, indented table, or "Title:  <none>".
func writeSection(out io.Writer, s section) {
	if len(s.rows) == 0 {
		fmt.Fprintf(out, "%s:  %s\n", s.title, none)
		return
	}
	fmt.Fprintf(out, "%s:\n", s.title)
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	fmt.Fprintf(tw, "  %s\n", strings.Join(s.header, "\t"))
	for _, r := range s.rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = cell(c)
		}
		fmt.Fprintf(tw, "  %s\n", strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
}

// conditionsSection lists conditions in the order the object holds them.
func conditionsSection(cs []metav1.Condition, now time.Time) section {
	s := section{title: "Conditions", header: []string{"TYPE", "STATUS", "REASON", "AGE", "MESSAGE"}}
	for _, c := range cs {
		s.rows = append(s.rows, []string{c.Type, string(c.Status), c.Reason, age(c.LastTransitionTime, now), c.Message})
	}
	return s
}

// kubeEvents lists the core/v1 Events whose involvedObject is obj, by
// uid (a name is reused after a delete; a uid is not), oldest first.
func kubeEvents(ctx context.Context, cl *clients, obj client.Object, now time.Time) (section, error) {
	s := section{title: "Events", header: []string{"TYPE", "REASON", "AGE", "FROM", "MESSAGE"}}
	list, err := cl.kube.CoreV1().Events(obj.GetNamespace()).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(obj.GetUID())).String(),
	})
	if err != nil {
		return s, err
	}
	items := list.Items
	sort.SliceStable(items, func(i, j int) bool { return eventTime(&items[i]).Before(eventTime(&items[j])) })
	for i := range items {
		e := &items[i]
		when := age(metav1.NewTime(eventTime(e)), now)
		if e.Count > 1 {
			when += fmt.Sprintf(" (x%d)", e.Count)
		}
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		s.rows = append(s.rows, []string{e.Type, e.Reason, when, from, e.Message})
	}
	return s, nil
}

// eventTime is when an Event last happened: lastTimestamp for the
// core/v1 recorders, eventTime for the events.k8s.io/v1 ones.
func eventTime(e *corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}

// describeRunEvents prints the last n run events of a's current run (by
// uid) from NATS. NATS is optional here: when it cannot be reached or
// read, one line says so and describe goes on.
func describeRunEvents(ctx context.Context, out io.Writer, g *globals, a *agentsv1alpha1.Agent, n int) {
	nc, js, err := g.jetStream()
	if err != nil {
		fmt.Fprintf(out, "Run events: NATS is not reachable, skipped (%s)\n", clean(err.Error()))
		return
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, runEventsTimeout)
	defer cancel()
	// A ring of the last n: a long run has many events, and only the tail
	// is shown.
	var ring []*eventsv1.RunEvent
	total := 0
	err = events.Replay(ctx, js, events.Filter{Namespace: a.Namespace, Agent: a.Name, UID: string(a.UID)}, events.ReplayOptions{},
		func(ev *eventsv1.RunEvent) error {
			if len(ring) < n {
				ring = append(ring, ev)
			} else {
				ring[total%n] = ev
			}
			total++
			return nil
		})
	if err != nil {
		fmt.Fprintf(out, "Run events: cannot be read from NATS, skipped (%s)\n", clean(err.Error()))
		return
	}
	if total == 0 {
		fmt.Fprintf(out, "Run events:  %s\n", none)
		return
	}
	fmt.Fprintf(out, "Run events (last %d of %d, from NATS):\n", len(ring), total)
	start := 0
	if total > n {
		start = total % n
	}
	for i := range ring {
		ev := ring[(start+i)%len(ring)]
		fmt.Fprintf(out, "  %4d  %s  %s\n", ev.GetSequence(), ev.GetTime().AsTime().Format("15:04:05.000"), clean(digest.Line(ev)))
	}
}

// timeText is an RFC 3339 time and how long ago it was; "" for none.
func timeText(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339) + " (" + age(*t, now) + " ago)"
}
