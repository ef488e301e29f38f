package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tools/agentctl/digest"
)

func newGetCmd(g *globals, use string) *cobra.Command {
	var output string
	var all bool
	cmd := &cobra.Command{
		Use:   use + " [KIND] [NAME]",
		Short: "Show Agents, AgentRuntimes, PromptPacks or ToolRegistries as a table, like kubectl get",
		Long: `Show objects as a table, like kubectl get. KIND is agents (the default),
agentruntimes (ar), promptpacks (pp) or toolregistries (tr); singular names work
too. A single argument that is not a kind is an Agent's name:

  agentctl get                 every Agent of the namespace
  agentctl get fix-issue-42    one Agent
  agentctl get ar -A -o wide   every AgentRuntime, with the wide columns
  agentctl get agent pp        the Agent named pp`,
		Args:              cobra.MaximumNArgs(2),
		ValidArgsFunction: g.completeKindAndName,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, name, err := kindAndName(args)
			if err != nil {
				return err
			}
			cl, err := g.clients()
			if err != nil {
				return err
			}
			var objs []client.Object
			if name != "" {
				o, err := cl.get(cmd.Context(), k, name)
				if err != nil {
					return err
				}
				objs = []client.Object{o}
			} else if objs, err = cl.list(cmd.Context(), k, all); err != nil {
				return err
			}
			return printObjects(cmd.OutOrStdout(), k, objs, output, all, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "wide, json or yaml; a table when empty")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list the objects of every namespace")
	return cmd
}

// kindAndName reads get's arguments: none (every Agent), KIND, NAME (an
// Agent) or KIND NAME.
func kindAndName(args []string) (*kind, string, error) {
	switch len(args) {
	case 0:
		return agentKind, "", nil
	case 1:
		if k, ok := lookupKind(args[0]); ok {
			return k, "", nil
		}
		return agentKind, args[0], nil
	default:
		k, ok := lookupKind(args[0])
		if !ok {
			return nil, "", unknownKind(args[0])
		}
		return k, args[1], nil
	}
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
		Use:               use,
		Short:             short,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeAgent,
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
