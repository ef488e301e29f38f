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
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
	"github.com/agentplane/agentplane/tools/localnode/node"
)

// Run parses args and runs a node until ctx ends (SIGTERM, SIGINT), then
// stops it gracefully.
func Run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("localnode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", filepath.Join(kubeassets.CacheRoot(), "stack", "kubeconfig"), "kubeconfig of the control plane")
	name := fs.String("name", "localnode", "Node name")
	stateDir := fs.String("state-dir", filepath.Join(kubeassets.CacheRoot(), "localnode"), "pod directories, volumes, logs and pid files")
	port := fs.Int("kubelet-port", 10250, "HTTPS port of the kubelet log endpoint on 127.0.0.1 (0: any free port)")
	stopPods := fs.Bool("stop-pods-on-exit", false, "kill every container process on exit instead of leaving them for the next run to adopt")
	imageStore := fs.String("image-store", "", "image store: directories of `docker save` tarballs and OCI layouts, separated by ':'; a container whose image is there runs from it (chrooted), any other as a host process (empty: none)")
	imageCache := fs.String("image-cache", "", "directory of unpacked image root filesystems (default <state-dir>/images)")
	podNetwork := fs.Bool("pod-network", false, "give each pod without hostNetwork its own network namespace and IP, with Service ClusterIPs and cluster DNS")
	podSubnet := fs.String("pod-subnet", "", "IPv4 subnet of pod addresses with --pod-network (default: a free 10.88.N.0/24)")
	simulate := fs.String("simulate-runs", "", "run no container: each pod goes Running at once and Succeeded after a random run length in MIN-MAX (e.g. 30s-120s), for load tests (empty: run pods)")
	maxPods := fs.Int("max-pods", 110, "the Node's pod capacity")
	qps := fs.Float64("kube-api-qps", 0, "client rate limit towards the API server, in requests per second (0: client-go's default, 5)")
	burst := fs.Int("kube-api-burst", 0, "client burst towards the API server (0: client-go's default, 10)")
	verbose := fs.Bool("v", false, "log debug details")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", *kubeconfig, err)
	}
	if *qps > 0 {
		cfg.QPS = float32(*qps)
	}
	if *burst > 0 {
		cfg.Burst = *burst
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	ncfg := node.Config{
		RESTConfig: cfg, Name: *name, StateDir: *stateDir, KubeletPort: *port, LeavePodsRunning: !*stopPods,
		ImageDirs: splitList(*imageStore), ImageCacheDir: *imageCache, MaxPods: *maxPods,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
	}
	if *simulate != "" {
		if ncfg.SimulateRuns, err = node.ParseSimulatedRuns(*simulate); err != nil {
			return err
		}
	}
	if *podNetwork {
		ncfg.Network = &node.NetworkConfig{Subnet: *podSubnet}
	}
	n, err := node.Start(ctx, ncfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "localnode: node %s is ready (kubelet endpoint https://127.0.0.1:%d)\n", n.Name(), n.KubeletPort())
	<-ctx.Done()
	n.Stop()
	return nil
}

// splitList splits a ':'-separated list of directories, dropping empties.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ":") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}
