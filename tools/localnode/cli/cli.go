// Package cli is the localnode command line, shared by the localnode
// binary and kubestack's hidden `localnode` subcommand.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/tools/localnode/node"
)

// Run parses args and runs a node until ctx ends (SIGTERM, SIGINT), then
// stops it gracefully.
func Run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("localnode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", filepath.Join(testenv.CacheRoot(), "stack", "kubeconfig"), "kubeconfig of the control plane")
	name := fs.String("name", "localnode", "Node name")
	stateDir := fs.String("state-dir", filepath.Join(testenv.CacheRoot(), "localnode"), "pod directories, volumes, logs and pid files")
	port := fs.Int("kubelet-port", 10250, "HTTPS port of the kubelet log endpoint on 127.0.0.1 (0: any free port)")
	stopPods := fs.Bool("stop-pods-on-exit", false, "kill every container process on exit instead of leaving them for the next run to adopt")
	verbose := fs.Bool("v", false, "log debug details")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", *kubeconfig, err)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	n, err := node.Start(ctx, node.Config{
		RESTConfig: cfg, Name: *name, StateDir: *stateDir, KubeletPort: *port, LeavePodsRunning: !*stopPods,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "localnode: node %s is ready (kubelet endpoint https://127.0.0.1:%d)\n", n.Name(), n.KubeletPort())
	<-ctx.Done()
	n.Stop()
	return nil
}
