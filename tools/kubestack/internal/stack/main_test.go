package stack

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/agentplane/agentplane/tools/localnode/cli"
)

// TestMain lets the test binary stand in for kubestack's hidden
// `localnode` subcommand, which Up runs as a detached process.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "localnode" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := cli.Run(ctx, os.Args[2:], os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "localnode: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
