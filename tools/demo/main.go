// Command demo installs the whole platform on one machine the way a user
// does, and shows it at work. On a real control plane with a local node
// (kubestack, its pods in a pod network of their own) it runs NATS with
// JetStream and tools/fakevendor as pods from their images, then `helm
// install`s the umbrella chart (helm/agentplane: the agent-controller,
// batch-poller, realtime-gateway and omnia-controllers, each a pod from its
// image). It launches a handful of Job runs, whose pods run the supervisor
// and the mock vendor CLIs from their images, and shows them live with a
// summary, then a batch run, a realtime session and an Omnia rollout
// (scenario), reads figures back from a Prometheus on the host that
// scrapes the services through their Services, and leaves everything up
// to explore. `make demo` builds the images and binaries and runs `demo
// up`; `make demo-down` runs `demo down`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/tools/demo/scenario"
)

// demoNamespace holds the story's recipes and runs.
const demoNamespace = "agentplane-demo"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: demo up|down [--bin DIR] [--repo DIR] [--images DIR]")
		os.Exit(2)
	}
	if err := runUntilSignalled(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
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

func cacheRoot() string {
	if d := os.Getenv("AGENTPLANE_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "agentplane")
}

func run(ctx context.Context, cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	bin := fs.String("bin", filepath.Join(cacheRoot(), "demo", "bin"), "directory of the built host binaries (kubestack, agentctl)")
	repo := fs.String("repo", ".", "repository root (helm/, examples/demo, VERSION)")
	imagesDir := fs.String("images", filepath.Join(cacheRoot(), "images"), "the image store `make images` writes, which localnode runs pods from")
	if err := fs.Parse(args); err != nil {
		return err
	}
	state := filepath.Join(cacheRoot(), "demo", "state")
	switch cmd {
	case "up":
		return up(ctx, *bin, *repo, *imagesDir, state)
	case "down":
		return down(*bin, state)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

// down stops Prometheus, then the control plane: kubestack down stops
// localnode, which stops every pod and removes the pod network.
func down(bin, state string) error {
	if err := stopAll(state); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
	}
	out, err := exec.Command(filepath.Join(bin, "kubestack"), "down").CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubestack down: %w\n%s", err, out)
	}
	if err := os.RemoveAll(state); err != nil {
		return err
	}
	fmt.Println("demo: stopped; the control plane, localnode with every pod (the platform, NATS, fakevendor, the runs) and Prometheus are gone")
	return nil
}

func up(ctx context.Context, bin, repo, imagesDir, state string) error {
	start := time.Now()
	last := start
	step := func(format string, args ...any) {
		now := time.Now()
		if last != start {
			fmt.Printf("  (step took %s)\n", now.Sub(last).Round(100*time.Millisecond))
		}
		last = now
		fmt.Printf("\n▶ "+format+"  (%s)\n", append(args, now.Sub(start).Round(time.Second))...)
	}
	raw, err := os.ReadFile(filepath.Join(repo, "VERSION"))
	if err != nil {
		return err
	}
	version := strings.TrimSpace(string(raw))
	if err := checkImages(imagesDir, version); err != nil {
		return err
	}
	// A second demo starts clean: stop what the first left.
	_ = stopAll(state)
	_ = exec.Command(filepath.Join(bin, "kubestack"), "down").Run()
	_ = os.RemoveAll(state)
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	// Every port is checked before anything starts, so a busy one fails
	// the demo at once and by name rather than halfway through.
	_, promErr := exec.LookPath("prometheus")
	if err := checkPorts(demoPorts(promErr == nil)); err != nil {
		return err
	}

	step("starting the control plane (etcd, kube-apiserver, kube-controller-manager) and localnode with a pod network")
	// No CRDs: the chart installs them, as it does for a user.
	ks := exec.CommandContext(ctx, filepath.Join(bin, "kubestack"), "up", "--crds", "", "--pod-network", "--image-store", imagesDir,
		"--port", fmt.Sprint(apiServerPort), "--etcd-port", fmt.Sprint(etcdPort),
		"--controller-manager-port", fmt.Sprint(controllerManagerPort), "--kubelet-port", fmt.Sprint(kubeletPort))
	ks.Stdout, ks.Stderr = os.Stderr, os.Stderr
	if err := ks.Run(); err != nil {
		return fmt.Errorf("kubestack up: %w", err)
	}
	kubeconfig := filepath.Join(cacheRoot(), "stack", "kubeconfig")
	c, err := newClient(kubeconfig)
	if err != nil {
		return err
	}

	step("starting NATS with JetStream as a pod (deployment and service %s/nats, image %s)", platformNS, imageOf("nats", version))
	natsAddr, err := startNATS(ctx, c, version)
	if err != nil {
		return err
	}
	natsURL := "nats://" + natsAddr
	if err := newWaiter(200*time.Millisecond).wait(ctx, "NATS to accept connections on its ClusterIP "+natsAddr, 30*time.Second, tcpUp(natsAddr)); err != nil {
		return err
	}

	step("starting the fake vendor batch APIs (tools/fakevendor) as a pod (deployment and service %s/fakevendor)", vendorNS)
	vendorURL, err := startFakeVendor(ctx, c, version)
	if err != nil {
		return err
	}

	step("helm install %s helm/agentplane -n %s: the CRDs, agent-controller, batch-poller, realtime-gateway, omnia-controllers (images %s)", releaseName, platformNS, version)
	if err := createRealtimeKey(ctx, c); err != nil {
		return err
	}
	if err := installPlatform(ctx, c, repo, kubeconfig, chartValues(version, vendorURL)); err != nil {
		return err
	}
	addrs := map[string]string{}
	for _, d := range platformDeployments {
		if addrs[d], err = serviceAddr(ctx, c, platformNS, d, "metrics"); err != nil {
			return err
		}
	}
	gateway, err := serviceAddr(ctx, c, platformNS, "realtime-gateway", "grpc")
	if err != nil {
		return err
	}

	step("starting Prometheus on %s (scraping the services' metrics Services, with their alert rules)", prometheusAddr)
	var targets []scrapeTarget
	for _, d := range platformDeployments {
		targets = append(targets, scrapeTarget{d, addrs[d]})
	}
	prom := startPrometheus(ctx, state, repo, targets)

	// Every Station of the story runs the mock CLIs' image.
	scenario.AgentImage = imageOf("mockagent", version)
	step("applying examples/demo and launching the runs")
	if err := showRuns(ctx, c, natsURL, filepath.Join(repo, "examples", "demo")); err != nil {
		return err
	}

	step("a batch run: submitted to a vendor's batch API through batch-poller, polled to its end, cleaned up")
	if err := showBatch(ctx, c, addrs["batch-poller"]); err != nil {
		return err
	}

	step("a realtime session: two agentctl prompts through realtime-gateway in one session, then close")
	if err := showRealtime(ctx, c, bin, kubeconfig, gateway); err != nil {
		return err
	}

	step("an Omnia AgentRuntime from a PromptPack, then a new pack version rolled out step by step")
	if err := showOmnia(ctx, c); err != nil {
		return err
	}
	promLine := "Prometheus: not running (make prometheus installs it)"
	if prom != nil {
		step("figures read back from Prometheus")
		showFigures(ctx, prom)
		promLine = "Prometheus: http://" + prometheusAddr + "   (import deploy/dashboards/*.json into a Grafana pointed at it)"
	}
	fmt.Printf("  (step took %s)\n", time.Since(last).Round(100*time.Millisecond))
	kubectl := filepath.Join(kubectlDir(), "kubectl")
	fmt.Printf(`
Everything is still running. Explore:

  export KUBECONFIG=%s
  %s -n %s get pods -o wide   # the platform, NATS, each a pod of its own
  %s get agents -A                  # the same runs, as kubectl shows them
  %s/agentctl -n %s logs fix-issue-42  # a run's output
  %s/agentctl -n %s events fix-issue-42 --nats-url %s
  %s/agentctl -n %s run --station bug-fixer --param issue=7 --param repo=acme/shop --follow --wait
  %s/agentctl -n %s describe %s        # the batch run: its batchId, provider and events
  %s/agentctl -n %s get ar -o wide     # the Omnia AgentRuntime, on its new pack version
  %s/agentctl -n %s get pp             # both PromptPack versions, the older Superseded
  %s -n %s logs deployment/agent-controller
  NATS: %s (service %s/nats); subject of every run event: agents.%s.<agent>.<kind> (stream AGENT_EVENTS)
  metrics (ClusterIP): agent-controller http://%s/metrics, batch-poller http://%s/metrics,
                       realtime-gateway http://%s/metrics, omnia-controllers http://%s/metrics
  realtime-gateway gRPC: %s   (agentctl prompt --gateway %s --insecure --service-account %s, for a running realtime run)
  %s

Stop it all with: make demo-down   (took %s)
`, kubeconfig, kubectl, platformNS, kubectl, bin, demoNamespace, bin, demoNamespace, natsURL,
		bin, demoNamespace, bin, demoNamespace, scenario.BatchRun,
		bin, demoNamespace, bin, demoNamespace, kubectl, platformNS,
		natsURL, platformNS, demoNamespace,
		addrs["agent-controller"], addrs["batch-poller"], addrs["realtime-gateway"], addrs["omnia-controllers"], gateway, gateway, demoNamespace+"/"+scenario.RealtimeCaller,
		promLine, time.Since(start).Round(time.Second))
	return nil
}

func kubectlDir() string {
	out, err := exec.Command(filepath.Join(cacheRoot(), "bin", "kubestack"), "assets").Output()
	if err != nil {
		return filepath.Join(cacheRoot(), "kube", "<version>")
	}
	return string(out[:len(out)-1])
}
