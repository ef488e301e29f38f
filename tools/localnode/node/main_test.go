package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/tools/localnode/node"
)

// The package shares one control plane (apiserver, etcd, controller-manager)
// and one node; each test works in its own namespace.
var (
	env      *testenv.Env
	shared   *node.Node
	stateDir string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "localnode tests need root: containers run in private mount namespaces")
		return 1
	}
	ctx := context.Background()
	e, err := testenv.Start(ctx, testenv.Options{ControllerManager: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	env = e
	defer func() { _ = e.Stop() }()
	stateDir, err = os.MkdirTemp("", "localnode-test-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "state dir: %v\n", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(stateDir) }()
	level := slog.LevelError
	if os.Getenv("LOCALNODE_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	shared, err = node.Start(ctx, node.Config{
		RESTConfig: e.Config, Name: "localnode", StateDir: stateDir,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start localnode: %v\n", err)
		return 1
	}
	defer shared.Stop()
	defer stopImageNode()
	return m.Run()
}
