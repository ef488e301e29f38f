package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tools/agentctl/digest"
)

type runFlags struct {
	station, model, taskID string
	params                 []string
	follow, wait           bool
	timeout                time.Duration
}

func newRunCmd(g *globals) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run --station STATION [--param k=v]...",
		Short: "Create an Agent (one run) in a Station, optionally following it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.station == "" {
				return &exitCodeError{code: exitUsage, msg: "--station is required"}
			}
			params := map[string]string{}
			for _, p := range f.params {
				k, v, ok := strings.Cut(p, "=")
				if !ok || k == "" {
					return &exitCodeError{code: exitUsage, msg: fmt.Sprintf("--param %q: want key=value", p)}
				}
				params[k] = v
			}
			return runAgent(cmd.Context(), g, f, params, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.station, "station", "", "Station to run in (required)")
	fl.StringArrayVar(&f.params, "param", nil, "a prompt parameter, key=value (repeatable)")
	fl.StringVar(&f.model, "model", "", "model for this run only (overrides the recipe's)")
	fl.StringVar(&f.taskID, "task-id", "", "external id for this run (TASK_ID)")
	fl.BoolVar(&f.follow, "follow", false, "print the run's events as they happen")
	fl.BoolVar(&f.wait, "wait", false, "wait for the run to end and exit with its exit code")
	fl.DurationVar(&f.timeout, "timeout", 0, "give up waiting after this long (0: never)")
	return cmd
}

func runAgent(ctx context.Context, g *globals, f *runFlags, params map[string]string, out io.Writer) error {
	cl, err := g.clients()
	if err != nil {
		return err
	}
	// A missing Station would fail the run at once; say so before creating it.
	st := &agentsv1alpha1.Station{}
	if err := cl.c.Get(ctx, types.NamespacedName{Namespace: cl.namespace, Name: f.station}, st); err != nil {
		if apierrors.IsNotFound(err) {
			return &exitCodeError{code: exitError, msg: fmt.Sprintf("Station %q not found in namespace %s (kubectl get stations -n %s lists them)", f.station, cl.namespace, cl.namespace)}
		}
		return fmt.Errorf("reach the API server to read Station %s: %w", f.station, err)
	}
	a := &agentsv1alpha1.Agent{
		ObjectMeta: metav1.ObjectMeta{GenerateName: f.station + "-", Namespace: cl.namespace},
		Spec:       agentsv1alpha1.AgentSpec{StationRef: f.station, Model: f.model, TaskID: f.taskID},
	}
	if len(params) > 0 {
		a.Spec.Parameters = params
	}
	if err := cl.c.Create(ctx, a); err != nil {
		return fmt.Errorf("create Agent in Station %s: %w", f.station, err)
	}
	fmt.Fprintf(out, "agent/%s created in namespace %s\n", a.Name, a.Namespace)
	if !f.follow && !f.wait {
		return nil
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	followed := make(chan struct{})
	if f.follow {
		go func() { defer close(followed); followEvents(ctx, g, cl.namespace, a.Name, out) }()
	} else {
		close(followed)
	}
	final, err := waitTerminal(ctx, cl, a.Name, out, !f.follow)
	if errors.Is(err, context.DeadlineExceeded) {
		return &exitCodeError{code: exitTimeout, msg: fmt.Sprintf("agent/%s did not finish within %s", a.Name, f.timeout)}
	}
	if err != nil {
		return err
	}
	// Let the run's last events arrive before printing the outcome.
	select {
	case <-followed:
	case <-time.After(followGrace):
	}
	fmt.Fprintf(out, "agent/%s %s", final.Name, final.Status.Phase)
	if final.Status.ExitCode != nil {
		fmt.Fprintf(out, " (exit %d)", *final.Status.ExitCode)
	}
	if final.Status.FailureReason != "" {
		fmt.Fprintf(out, ": %s", final.Status.FailureReason)
	}
	fmt.Fprintln(out)
	if !f.wait {
		return nil
	}
	return exitFor(final)
}

// exitFor maps a finished Agent to agentctl's exit code.
func exitFor(a *agentsv1alpha1.Agent) error {
	switch {
	case a.Status.Phase == agentsv1alpha1.PhaseSucceeded:
		return nil
	case a.Status.ExitCode != nil && *a.Status.ExitCode != 0:
		return &exitCodeError{code: int(*a.Status.ExitCode)}
	default:
		return &exitCodeError{code: exitFailedNoCode}
	}
}

// followGrace is how long a finished run's last events may take to arrive.
const followGrace = 5 * time.Second

// followEvents prints the run's events from the first one, so nothing that
// happened before the stream was opened is missed, and returns after the
// run's terminal lifecycle event. Without NATS it says so once; the phase
// changes are still printed from the Agent's status.
func followEvents(ctx context.Context, g *globals, ns, name string, out io.Writer) {
	nc, js, err := g.jetStream()
	if err != nil {
		fmt.Fprintf(out, "(events unavailable: %v; following the Agent's status instead)\n", err)
		return
	}
	defer nc.Close()
	for ctx.Err() == nil {
		err := events.Replay(ctx, js, events.Filter{Namespace: ns, Agent: name}, events.ReplayOptions{Follow: true}, func(ev *eventsv1.RunEvent) error {
			if digest.Interesting(ev) {
				fmt.Fprintf(out, "  %4d  %s\n", ev.GetSequence(), digest.Line(ev))
			}
			if digest.Final(ev) {
				return events.ErrStop
			}
			return nil
		})
		if err == nil || errors.Is(err, events.ErrStop) {
			return
		}
		// The stream may not exist until the run's first event: retry.
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitTerminal watches the Agent until it is Succeeded or Failed. With
// printPhases it prints each phase change.
func waitTerminal(ctx context.Context, cl *clients, name string, out io.Writer, printPhases bool) (*agentsv1alpha1.Agent, error) {
	last := agentsv1alpha1.AgentPhase("")
	for {
		a, err := cl.agent(ctx, name)
		if err != nil {
			return nil, err
		}
		if printPhases && a.Status.Phase != last {
			fmt.Fprintf(out, "agent/%s %s\n", name, phaseOf(a))
			last = a.Status.Phase
		}
		if a.Status.Phase.IsTerminal() {
			return a, nil
		}
		w, err := cl.c.Watch(ctx, &agentsv1alpha1.AgentList{}, &client.ListOptions{
			Namespace: cl.namespace, FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
			Raw: &metav1.ListOptions{ResourceVersion: a.ResourceVersion},
		})
		if err != nil {
			return nil, fmt.Errorf("watch Agent %s: %w", name, err)
		}
		done, err := drain(ctx, w, name, out, printPhases, &last)
		w.Stop()
		if err != nil || done != nil {
			return done, err
		}
	}
}

func drain(ctx context.Context, w watch.Interface, name string, out io.Writer, printPhases bool, last *agentsv1alpha1.AgentPhase) (*agentsv1alpha1.Agent, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil // re-read and re-watch
			}
			if ev.Type == watch.Deleted {
				return nil, fmt.Errorf("agent/%s was deleted before it finished", name)
			}
			a, ok := ev.Object.(*agentsv1alpha1.Agent)
			if !ok {
				continue
			}
			if printPhases && a.Status.Phase != *last {
				fmt.Fprintf(out, "agent/%s %s\n", name, phaseOf(a))
				*last = a.Status.Phase
			}
			if a.Status.Phase.IsTerminal() {
				return a, nil
			}
		}
	}
}

func phaseOf(a *agentsv1alpha1.Agent) string {
	if a.Status.Phase == "" {
		return string(agentsv1alpha1.PhasePending)
	}
	return string(a.Status.Phase)
}
