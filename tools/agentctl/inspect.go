package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tools/agentctl/digest"
)

func newGetCmd(g *globals, use string) *cobra.Command {
	var output string
	var all bool
	cmd := &cobra.Command{
		Use:   use + " [AGENT]",
		Short: "Show Agents as a table (or one Agent), like kubectl get agents",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := g.clients()
			if err != nil {
				return err
			}
			var items []agentsv1alpha1.Agent
			if len(args) == 1 {
				a, err := cl.agent(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				items = []agentsv1alpha1.Agent{*a}
			} else {
				list := &agentsv1alpha1.AgentList{}
				opts := []client.ListOption{}
				if !all {
					opts = append(opts, client.InNamespace(cl.namespace))
				}
				if err := cl.c.List(cmd.Context(), list, opts...); err != nil {
					return fmt.Errorf("list Agents: %w", err)
				}
				items = list.Items
			}
			return printAgents(cmd.OutOrStdout(), items, output, all)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml; a table when empty")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list Agents of every namespace")
	return cmd
}

func printAgents(out io.Writer, items []agentsv1alpha1.Agent, output string, withNS bool) error {
	sort.Slice(items, func(i, j int) bool {
		if items[i].Namespace != items[j].Namespace {
			return items[i].Namespace < items[j].Namespace
		}
		return items[i].Name < items[j].Name
	})
	switch output {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(items)
	case "yaml":
		raw, err := yaml.Marshal(items)
		if err != nil {
			return err
		}
		_, err = out.Write(raw)
		return err
	case "":
	default:
		return &exitCodeError{code: exitUsage, msg: fmt.Sprintf("-o %q: want json or yaml", output)}
	}
	// The columns of the Agent CRD's printer columns, as kubectl get shows them.
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	if withNS {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "NAME\tPHASE\tSTATION\tJOB\tAGE")
	for _, a := range items {
		if withNS {
			fmt.Fprintf(tw, "%s\t", a.Namespace)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Name, a.Status.Phase, a.Spec.StationRef, a.Status.JobName,
			duration.HumanDuration(time.Since(a.CreationTimestamp.Time)))
	}
	return tw.Flush()
}

func newLogsCmd(g *globals) *cobra.Command {
	return newAgentCmd(g, "logs AGENT", "Print a run's output: the pod log while it runs, status.output after",
		func(cmd *cobra.Command, cl *clients, name string) error {
			a, err := cl.agent(cmd.Context(), name)
			if err != nil {
				return err
			}
			if log, err := podLog(cmd.Context(), cl, a); err == nil {
				_, err = io.WriteString(cmd.OutOrStdout(), log)
				return err
			}
			if a.Status.Output == "" && a.Status.FailureReason != "" {
				return fmt.Errorf("agent/%s has no output: %s", a.Name, a.Status.FailureReason)
			}
			_, err = io.WriteString(cmd.OutOrStdout(), a.Status.Output)
			return err
		})
}

// newAgentCmd is a command about the one Agent its argument names; do
// runs it with the cluster's clients.
func newAgentCmd(g *globals, use, short string, do func(cmd *cobra.Command, cl *clients, name string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := g.clients()
			if err != nil {
				return err
			}
			return do(cmd, cl, args[0])
		},
	}
}

// podLog reads the agent container's log from the run's pod.
func podLog(ctx context.Context, cl *clients, a *agentsv1alpha1.Agent) (string, error) {
	if a.Status.JobName == "" {
		return "", fmt.Errorf("no Job yet")
	}
	pods, err := cl.kube.CoreV1().Pods(a.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + a.Status.JobName})
	if err != nil || len(pods.Items) == 0 {
		return "", fmt.Errorf("no pod")
	}
	raw, err := cl.kube.CoreV1().Pods(a.Namespace).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{
		Container: agentsv1alpha1.AgentContainerName, TailLines: ptr.To[int64](10000),
	}).DoRaw(ctx)
	return string(raw), err
}

func newEventsCmd(g *globals) *cobra.Command {
	var follow, rawJSON bool
	cmd := newAgentCmd(g, "events AGENT", "Replay a run's events from NATS JetStream",
		func(cmd *cobra.Command, cl *clients, name string) error {
			nc, js, err := g.jetStream()
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			out := cmd.OutOrStdout()
			return events.Replay(ctx, js, events.Filter{Namespace: cl.namespace, Agent: name}, events.ReplayOptions{Follow: follow}, func(ev *eventsv1.RunEvent) error {
				if rawJSON {
					b, err := events.Encode(ev)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintln(out, string(b))
					return err
				}
				_, err := fmt.Fprintf(out, "%4d  %s  %s\n", ev.GetSequence(), ev.GetTime().AsTime().Format("15:04:05.000"), digest.Line(ev))
				return err
			})
		})
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events")
	cmd.Flags().BoolVar(&rawJSON, "json", false, "print each event's JSON envelope")
	return cmd
}

func newCancelCmd(g *globals) *cobra.Command {
	return newAgentCmd(g, "cancel AGENT", "Stop a run: delete the Agent, which deletes its Job and pod",
		func(cmd *cobra.Command, cl *clients, name string) error {
			a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: cl.namespace, Name: name}}
			if err := cl.c.Delete(cmd.Context(), a, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
				return fmt.Errorf("cancel agent/%s: %w", name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "agent/%s cancelled\n", name)
			return nil
		})
}
