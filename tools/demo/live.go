package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/kubescheme"
	"github.com/agentplane/agentplane/tools/agentctl/digest"
	"github.com/agentplane/agentplane/tools/demo/scenario"
)

// newClient is a client of the demo's control plane that knows the core
// types and agentplane's.
func newClient(kubeconfig string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	scheme, err := kubescheme.New()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// showRuns applies the demo recipes, launches the runs, prints their phase
// changes and a digest of their events until all are finished, then the
// summary table.
func showRuns(ctx context.Context, c client.Client, natsURL, manifests string) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNamespace}}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	if err := scenario.Apply(ctx, c, demoNamespace, manifests, os.Stdout); err != nil {
		return err
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return fmt.Errorf("connect to NATS: %w", err)
	}
	defer nc.Close()
	lines := make(chan string, 4096)
	sub, err := nc.Subscribe("agents."+demoNamespace+".>", func(m *nats.Msg) {
		if ev, err := events.DecodeMessage(m.Data, m.Header); err == nil && digest.Interesting(ev) {
			select {
			case lines <- fmt.Sprintf("  %-15s %s", ev.GetRun().GetAgent(), digest.Line(ev)):
			default: // the screen is a digest; NATS keeps every event
			}
		}
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := scenario.Launch(ctx, c, demoNamespace, os.Stdout); err != nil {
		return err
	}

	fmt.Println("\n  live: phase changes and each run's events (from NATS)")
	flush := func() {
		for {
			select {
			case l := <-lines:
				fmt.Println(l)
			default:
				return
			}
		}
	}
	phases := map[string]agentsv1alpha1.AgentPhase{}
	var list agentsv1alpha1.AgentList
	what := fmt.Sprintf("the %d runs to finish", len(scenario.Runs))
	waitErr := newWaiter(300*time.Millisecond).wait(ctx, what, 4*time.Minute, func(ctx context.Context) error {
		flush()
		list = agentsv1alpha1.AgentList{}
		if err := c.List(ctx, &list, client.InNamespace(demoNamespace)); err != nil {
			return fatal(err)
		}
		for _, a := range list.Items {
			p := phaseOf(&a)
			if phases[a.Name] != p {
				fmt.Printf("  %-15s ── %s\n", a.Name, p)
				phases[a.Name] = p
			}
		}
		if done, status := runsStatus(list.Items, len(scenario.Runs), time.Now()); !done {
			return errors.New(status)
		}
		return nil
	})
	if waitErr != nil && !errors.Is(waitErr, errTimedOut) {
		return waitErr
	}
	time.Sleep(500 * time.Millisecond)
	flush()
	fmt.Println("\n  summary")
	if err := scenario.Summary(ctx, c, demoNamespace, os.Stdout); err != nil {
		return err
	}
	if waitErr != nil {
		return fmt.Errorf("not every run finished within 4 minutes; see the table above and the agent-controller log: %w", waitErr)
	}
	return promisesKept(list.Items)
}

// phaseOf is a's phase, Pending before the controller has set one.
func phaseOf(a *agentsv1alpha1.Agent) agentsv1alpha1.AgentPhase {
	if a.Status.Phase == "" {
		return agentsv1alpha1.PhasePending
	}
	return a.Status.Phase
}

// runsStatus says whether want runs have all finished and, while not, how
// many have and which are still awaited, each with its phase and how long
// it has been in it ("fix-issue-42 Running 12s").
func runsStatus(agents []agentsv1alpha1.Agent, want int, now time.Time) (bool, string) {
	finished := 0
	var waiting []string
	for i := range agents {
		a := &agents[i]
		p := phaseOf(a)
		if p.IsTerminal() {
			finished++
			continue
		}
		since := a.CreationTimestamp.Time
		if p == agentsv1alpha1.PhaseRunning && a.Status.StartedAt != nil {
			since = a.Status.StartedAt.Time
		}
		waiting = append(waiting, fmt.Sprintf("%s %s %s", a.Name, p, now.Sub(since).Round(time.Second)))
	}
	status := fmt.Sprintf("%d/%d finished", finished, want)
	if len(waiting) > 0 {
		status += "; " + strings.Join(waiting, ", ")
	}
	return finished == want, status
}

// promisesKept fails the demo when a run did not end as its recipe
// promises, so a broken platform never looks like a working demo.
func promisesKept(agents []agentsv1alpha1.Agent) error {
	byName := map[string]*agentsv1alpha1.Agent{}
	for i := range agents {
		byName[agents[i].Name] = &agents[i]
	}
	var broken []string
	for _, r := range scenario.Runs {
		if a, ok := byName[r.Name]; !ok {
			broken = append(broken, r.Name+": missing")
		} else if why := r.Check(a); why != "" {
			broken = append(broken, why)
		}
	}
	if len(broken) > 0 {
		return fmt.Errorf("runs that did not end as promised: %v", broken)
	}
	fmt.Println("\n  every run ended as its recipe promises")
	return nil
}
