package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// completeTimeout bounds the cluster read behind one completion: a shell
// waiting on Tab must not hang on an unreachable API server.
const completeTimeout = 5 * time.Second

// completeKindAndName completes get and describe: first a kind or an
// Agent's name, then, after a kind, the names of that kind.
func (g *globals) completeKindAndName(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		var out []string
		for _, k := range kinds {
			for _, n := range append([]string{k.plural}, k.names...) {
				if strings.HasPrefix(n, toComplete) {
					out = append(out, n)
				}
			}
		}
		return append(out, g.names(cmd.Context(), agentKind, toComplete)...), cobra.ShellCompDirectiveNoFileComp
	case 1:
		if k, ok := lookupKind(args[0]); ok {
			return g.names(cmd.Context(), k, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// completeAgent completes the Agent name of a command whose first
// argument is one (logs, events, cancel, prompt, chat).
func (g *globals) completeAgent(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return g.names(cmd.Context(), agentKind, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// names lists the names of kind k in the namespace that start with
// prefix. A cluster that cannot be read completes nothing; the reason
// goes to cobra's completion debug log ($BASH_COMP_DEBUG_FILE).
func (g *globals) names(ctx context.Context, k *kind, prefix string) []string {
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	cl, err := g.clients()
	if err != nil {
		cobra.CompDebugln("agentctl: "+err.Error(), false)
		return nil
	}
	objs, err := cl.list(ctx, k, false)
	if err != nil {
		cobra.CompDebugln("agentctl: "+err.Error(), false)
		return nil
	}
	var out []string
	for _, o := range objs {
		if strings.HasPrefix(o.GetName(), prefix) {
			out = append(out, o.GetName())
		}
	}
	return out
}
