// Command agentctl launches and follows agent runs without writing YAML,
// and shows every kind of the platform (docs/agentctl.md):
//
//	agentctl run --station bug-fixer --param issue=42 --follow --wait
//	agentctl get | list [KIND] [NAME] [-o wide|json|yaml] [-A]
//	agentctl describe [KIND] NAME [--events N]
//	agentctl logs AGENT        agentctl events AGENT [--follow]
//	agentctl cancel AGENT      agentctl prompt AGENT "text"
//	agentctl chat AGENT
//	agentctl completion bash|zsh|fish|powershell
//
// KIND is agents (the default), agentruntimes (ar), promptpacks (pp) or
// toolregistries (tr). Shell completion completes kinds and, from the
// cluster, the names of objects.
//
// It follows the usual kubeconfig conventions (--kubeconfig, KUBECONFIG,
// --context, -n/--namespace) and reads run events from NATS JetStream
// (--nats-url, NATS_URL; --nats-creds, NATS_CREDS and --nats-ca, NATS_CA
// when the server requires a credential and TLS), falling back to watching
// the Agent's status when NATS cannot be reached.
//
//	agentctl nats init --out DIR       the NATS credentials of an install
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes beyond the run's own exit code.
const (
	exitError = 1
	exitUsage = 2
	// exitFailedNoCode is used by --wait for a Failed run that reports no
	// exit code.
	exitFailedNoCode = 65
	// exitTimeout is used by --wait when --timeout passes first.
	exitTimeout = 66
)

// exitCodeError carries a process exit code out of a command.
type exitCodeError struct {
	code int
	msg  string
	// fatal ends an interactive chat rather than moving to the next line.
	fatal bool
}

func (e *exitCodeError) Error() string { return e.msg }

func main() {
	root := newRoot()
	if err := root.Execute(); err != nil {
		var ec *exitCodeError
		if errors.As(err, &ec) {
			if ec.msg != "" {
				fmt.Fprintln(os.Stderr, "agentctl:", ec.msg)
			}
			os.Exit(ec.code)
		}
		fmt.Fprintln(os.Stderr, "agentctl:", err)
		os.Exit(exitError)
	}
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "agentctl",
		Short:         "Launch and follow agentplane runs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	f := root.PersistentFlags()
	f.StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&g.context, "context", "", "kubeconfig context to use")
	f.StringVarP(&g.namespace, "namespace", "n", "", "namespace (default: the context's)")
	f.StringVar(&g.natsURL, "nats-url", envOr("NATS_URL", "nats://127.0.0.1:4222"), "NATS server holding the AGENT_EVENTS stream ($NATS_URL)")
	f.StringVar(&g.natsCreds, "nats-creds", envOr("NATS_CREDS", ""), "NATS user credentials file, e.g. the agentctl.creds of agentctl nats init ($NATS_CREDS)")
	f.StringVar(&g.natsCA, "nats-ca", envOr("NATS_CA", ""), "CA certificates that verify the NATS server's certificate; TLS is required when set ($NATS_CA)")
	root.AddCommand(newRunCmd(g), newGetCmd(g, "get"), newGetCmd(g, "list"), newDescribeCmd(g), newLogsCmd(g), newEventsCmd(g), newCancelCmd(g),
		newPromptCmd(g), newChatCmd(g), newNATSCmd(g))
	return root
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
