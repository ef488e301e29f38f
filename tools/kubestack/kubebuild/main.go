// Command kubebuild builds etcd, kube-apiserver, kube-controller-manager and
// kubectl at the pinned versions into their cache entry (a no-op when the
// entry is complete), reporting progress every 10 s on stderr, then prints
// the entry's directory on stdout, for KUBEBUILDER_ASSETS. It is `kubestack
// assets` without the rest of kubestack: it imports little beyond the
// standard library, so on a cold machine it compiles in seconds and the
// long build starts at once, while `make demo` compiles everything else.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentplane/agentplane/tools/kubestack/internal/build"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: kubebuild (no arguments; KUBEBUILDER_ASSETS names another cache entry)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	opts := build.DefaultOptions(os.Stderr)
	err := build.Ensure(ctx, opts)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubebuild: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(opts.Dir)
}
