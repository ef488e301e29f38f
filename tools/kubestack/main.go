// Command kubestack builds and runs a real Kubernetes control plane on
// loopback: etcd, kube-apiserver and kube-controller-manager, built once from
// their Go modules into a versioned cache.
//
//	kubestack build     build the binaries into the cache (no-op when cached)
//	kubestack assets    build if needed, then print the binaries' directory
//	kubestack up        start the control plane, install CRDs, print a kubeconfig
//	kubestack down      stop it and remove its state
//	kubestack status    show what runs
//
// `up` also starts localnode (pods as local processes) unless
// --localnode=false; it runs as kubestack itself re-executed with the
// hidden `localnode` subcommand, which takes localnode's own flags. Its
// image store defaults to $AGENTPLANE_CACHE/images, where `make images`
// writes tarballs, so pods naming those images run from them;
// --pod-network gives pods their own network namespaces and addresses
// (see docs/localnode.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
	"github.com/agentplane/agentplane/tools/kubestack/internal/build"
	"github.com/agentplane/agentplane/tools/kubestack/internal/stack"
	"github.com/agentplane/agentplane/tools/localnode/cli"
)

const usage = `usage: kubestack <build|assets|up|down|status> [flags]

  build    build etcd, kube-apiserver, kube-controller-manager and kubectl (cached)
  assets   print the directory holding the binaries (building them if needed)
  up       start the control plane on loopback, install the CRDs and start localnode
  down     stop the control plane and remove its state
  status   show the running control plane
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err := runUntilSignalled(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "kubestack: %v\n", err)
		os.Exit(1)
	}
}

// runUntilSignalled runs cmd with a context that SIGINT or SIGTERM cancels.
// It is apart from main so the signal handler is released (by the deferred
// stop) before main calls os.Exit, which skips deferred calls.
func runUntilSignalled(cmd string, args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, cmd, args)
}

func run(ctx context.Context, cmd string, args []string) error {
	defaultState := filepath.Join(kubeassets.CacheRoot(), "stack")
	switch cmd {
	case "build":
		return build.Ensure(ctx, build.DefaultOptions(os.Stderr))
	case "assets":
		opts := build.DefaultOptions(os.Stderr)
		if err := build.Ensure(ctx, opts); err != nil {
			return err
		}
		fmt.Println(opts.Dir)
		return nil
	case "up":
		fs := flag.NewFlagSet("up", flag.ContinueOnError)
		dir := fs.String("dir", defaultState, "state directory (PKI, kubeconfig, etcd data, logs)")
		port := fs.Int("port", 6443, "kube-apiserver secure port")
		etcdPort := fs.Int("etcd-port", 2379, "etcd client port (the peer port is this + 1)")
		kcmPort := fs.Int("controller-manager-port", 10257, "kube-controller-manager secure port")
		crds := fs.String("crds", defaultCRDDir(), "directory of CRD YAML to install (empty: none)")
		timeout := fs.Duration("timeout", 90*time.Second, "how long to wait for each component")
		withNode := fs.Bool("localnode", true, "also start localnode, so pods run as local processes")
		kubeletPort := fs.Int("kubelet-port", 10250, "localnode's kubelet endpoint port")
		imageStore := fs.String("image-store", defaultImageStore(), "localnode's image store, directories separated by ':' (env AGENTPLANE_IMAGE_STORE; empty: none): pods whose image is there run from it")
		podNetwork := fs.Bool("pod-network", os.Getenv("AGENTPLANE_POD_NETWORK") == "1", "give localnode's pods their own network namespaces, IPs, ClusterIPs and DNS (env AGENTPLANE_POD_NETWORK=1)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		var node *stack.LocalNode
		if *withNode {
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find kubestack's own binary to run localnode: %w", err)
			}
			node = &stack.LocalNode{Command: []string{self, "localnode"}, Port: *kubeletPort, PodNetwork: *podNetwork,
				ImageCache: filepath.Join(kubeassets.CacheRoot(), "localnode", "rootfs")}
			for _, d := range strings.Split(*imageStore, ":") {
				if d != "" {
					node.ImageStore = append(node.ImageStore, d)
				}
			}
		}
		opts := build.DefaultOptions(os.Stderr)
		if err := build.Ensure(ctx, opts); err != nil {
			return err
		}
		r, err := stack.Up(ctx, stack.Config{
			Dir: *dir, Assets: opts.Dir, CRDDir: *crds,
			APIServerPort: *port, EtcdPort: *etcdPort, EtcdPeerPort: *etcdPort + 1, ControllerManagerPort: *kcmPort,
			ReadyTimeout: *timeout, Log: os.Stderr, LocalNode: node,
		})
		if err != nil {
			return err
		}
		fmt.Printf(`kubestack is up: kube-apiserver %s at %s (etcd %s)

  export KUBECONFIG=%s
  %s get namespaces
  %s get crds

logs: %s
stop: make kubestack-down   (or: go run ./tools/kubestack down)
`, kubeassets.KubeVersion, r.Server, kubeassets.EtcdVersion, r.Kubeconfig,
			filepath.Join(opts.Dir, kubeassets.BinKubectl), filepath.Join(opts.Dir, kubeassets.BinKubectl), filepath.Join(*dir, "logs"))
		return nil
	case "localnode":
		// Hidden: the localnode process `up` starts.
		return cli.Run(ctx, args, os.Stderr)
	case "down":
		fs := flag.NewFlagSet("down", flag.ContinueOnError)
		dir := fs.String("dir", defaultState, "state directory given to up")
		if err := fs.Parse(args); err != nil {
			return err
		}
		return stack.Down(*dir, os.Stderr)
	case "status":
		fs := flag.NewFlagSet("status", flag.ContinueOnError)
		dir := fs.String("dir", defaultState, "state directory given to up")
		if err := fs.Parse(args); err != nil {
			return err
		}
		st, err := stack.ReadState(*dir)
		if errors.Is(err, os.ErrNotExist) {
			fmt.Println("kubestack: not running")
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Printf("server: %s\nkubeconfig: %s\n", st.Server, st.Kubeconfig)
		for _, line := range stack.Describe(st) {
			fmt.Println(line)
		}
		return nil
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
}

// defaultImageStore is where `make images` writes image tarballs
// ($AGENTPLANE_CACHE/images), unless AGENTPLANE_IMAGE_STORE says otherwise.
func defaultImageStore() string {
	if v, ok := os.LookupEnv("AGENTPLANE_IMAGE_STORE"); ok {
		return v
	}
	return filepath.Join(kubeassets.CacheRoot(), "images")
}

// defaultCRDDir finds deploy/crds of the enclosing repository (the directory
// holding go.work), so `kubestack up` installs this checkout's CRDs.
func defaultCRDDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			crds := filepath.Join(dir, "deploy", "crds")
			if _, err := os.Stat(crds); err == nil {
				return crds
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
