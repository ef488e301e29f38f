// Command localnode is a node without a kubelet: it registers a Node with
// the API server, binds pending pods to it and runs their containers as
// local processes, with status and logs, so the whole platform runs on one
// machine against a real control plane. See package node.
//
//	localnode --kubeconfig ~/.cache/agentplane/stack/kubeconfig --name localnode --state-dir DIR --kubelet-port 10250
//
// With --image-store DIRS, a container whose image is a `docker save`
// tarball or OCI layout in DIRS runs from that image, chrooted into its
// root filesystem (image mode); --pod-network gives pods network namespaces
// and addresses of their own, Service ClusterIPs and cluster DNS. See
// docs/localnode.md.
//
// SIGTERM or SIGINT stop it gracefully; container processes keep running for
// the next start to adopt unless --stop-pods-on-exit is given.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentplane/agentplane/tools/localnode/cli"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "localnode: %v\n", err)
		os.Exit(1)
	}
}

// run runs the node until SIGINT or SIGTERM. It is apart from main so the
// signal handler is released (by the deferred stop) before main calls
// os.Exit, which skips deferred calls.
func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cli.Run(ctx, os.Args[1:], os.Stderr)
}
