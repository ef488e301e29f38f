// Command demo runs the whole platform on one machine: a real control
// plane with a local node (kubestack), NATS with JetStream, the
// agent-controller, batch-poller in front of tools/fakevendor,
// realtime-gateway, omnia-controllers, and run pods whose supervisor
// drives the mock vendor CLIs. It launches a handful of Job runs and shows
// them live with a summary, then a batch run, a realtime session and an
// Omnia rollout (scenario), and leaves everything up to explore. `make demo` builds the binaries and
// runs `demo up`; `make demo-down` runs `demo down`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentplane/agentplane/tools/demo/scenario"
)

const (
	natsPort = 4222
	// Not 8081: that is the Omnia agent pods' health port (runtime.go).
	controllerAddr = "127.0.0.1:8085"
	demoNamespace  = "agentplane-demo"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: demo up|down [--bin DIR] [--repo DIR]")
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
	bin := fs.String("bin", filepath.Join(cacheRoot(), "demo", "bin"), "directory of the built binaries")
	repo := fs.String("repo", ".", "repository root (for examples/demo)")
	store := fs.String("store", "", "JetStream store directory (nats only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	state := filepath.Join(cacheRoot(), "demo", "state")
	switch cmd {
	case "up":
		return up(ctx, *bin, *repo, state)
	case "down":
		return down(*bin, state)
	case "nats":
		return serveNATS(ctx, *store)
	case "runtime":
		return serveRuntime(ctx)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

func down(bin, state string) error {
	if err := stopAll(state); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
	}
	out, err := exec.Command(filepath.Join(bin, "kubestack"), "down").CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubestack down: %w\n%s", err, out)
	}
	if err := removeStaged(state); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
	}
	if err := os.RemoveAll(state); err != nil {
		return err
	}
	fmt.Println("demo: stopped; the control plane, localnode, NATS, fakevendor and the platform's services are gone")
	return nil
}

func up(ctx context.Context, bin, repo, state string) error {
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Printf("\n▶ "+format+"  (%s)\n", append(args, time.Since(start).Round(time.Second))...)
	}
	// A second demo starts clean: stop what the first left.
	_ = stopAll(state)
	_ = exec.Command(filepath.Join(bin, "kubestack"), "down").Run()
	_ = removeStaged(state)
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

	step("starting the control plane (etcd, kube-apiserver, kube-controller-manager) and localnode")
	ks := exec.CommandContext(ctx, filepath.Join(bin, "kubestack"), "up", "--crds", filepath.Join(repo, "deploy", "crds"),
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

	step("starting NATS with JetStream on 127.0.0.1:%d", natsPort)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if _, err := spawn(state, "nats", self, []string{"nats", "--store", filepath.Join(state, "jetstream")}, nil); err != nil {
		return err
	}
	natsAddr := loopback(natsPort)
	if err := newWaiter(200*time.Millisecond).wait(ctx, "NATS to accept connections on "+natsAddr, 20*time.Second, tcpUp(natsAddr)); err != nil {
		return fmt.Errorf("NATS did not start (log %s): %w", filepath.Join(state, "logs", "nats.log"), err)
	}

	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	step("starting the fake vendor batch APIs (tools/fakevendor) on %s and batch-poller on %s", fakeVendorAddr, batchPollerGRPCAddr)
	batchArgs, err := startBatch(ctx, c, state, bin, kubeconfig, natsURL)
	if err != nil {
		return err
	}
	step("starting realtime-gateway on %s", gatewayGRPCAddr)
	realtimeArgs, err := startRealtime(ctx, c, state, bin, kubeconfig)
	if err != nil {
		return err
	}

	step("starting the agent-controller")
	supervisor, err := stageSupervisor(bin, state)
	if err != nil {
		return fmt.Errorf("stage the supervisor for the run pods: %w", err)
	}
	// The Omnia agent pods run as their own user too: their runtime
	// stand-in is this binary, staged beside the supervisor.
	runtime := filepath.Join(filepath.Dir(supervisor), "demo")
	if err := copyFile(self, runtime); err != nil {
		return fmt.Errorf("stage the demo runtime for the Omnia agent pods: %w", err)
	}
	if _, err := spawn(state, "agent-controller", filepath.Join(bin, "agent-controller"), append([]string{
		"--kubeconfig", kubeconfig, "--leader-elect=false",
		// One port for /metrics and the probes, as the demo prints it.
		"--metrics-bind-address", controllerAddr, "--health-probe-bind-address", controllerAddr,
		"--supervisor-path", supervisor, "--supervisor-image", "agentplane/supervisor:demo",
		"--nats-url", natsURL, "--poll-interval", "5s",
	}, append(batchArgs, realtimeArgs...)...), nil); err != nil {
		return err
	}
	readyz := "http://" + controllerAddr + "/readyz"
	if err := newWaiter(300*time.Millisecond).wait(ctx, "the agent-controller to be ready ("+readyz+")", 30*time.Second, httpOK(readyz)); err != nil {
		return fmt.Errorf("the agent-controller is not ready (log %s): %w", filepath.Join(state, "logs", "agent-controller.log"), err)
	}

	step("starting omnia-controllers")
	if err := startOmnia(ctx, state, bin, kubeconfig, runtime); err != nil {
		return err
	}

	step("starting Prometheus on %s (scraping the agent-controller, with its alert rules)", prometheusAddr)
	prom := startPrometheus(ctx, state, repo, controllerAddr)

	step("applying examples/demo and launching the runs")
	if err := showRuns(ctx, c, natsURL, filepath.Join(repo, "examples", "demo")); err != nil {
		return err
	}

	step("a batch run: submitted to a vendor's batch API through batch-poller, polled to its end, cleaned up")
	if err := showBatch(ctx, c); err != nil {
		return err
	}

	step("a realtime session: two agentctl prompts through realtime-gateway in one session, then close")
	if err := showRealtime(ctx, c, bin, kubeconfig); err != nil {
		return err
	}

	step("an Omnia AgentRuntime from a PromptPack, then a new pack version rolled out step by step")
	if err := showOmnia(ctx, c); err != nil {
		return err
	}
	promLine := "Prometheus: not running (make prometheus installs it)"
	if prom != nil {
		showFigures(ctx, prom)
		promLine = "Prometheus: http://" + prometheusAddr + "   (import deploy/dashboards/*.json into a Grafana pointed at it)"
	}
	fmt.Printf(`
Everything is still running. Explore:

  export KUBECONFIG=%s
  %s/kubectl get agents -A                     # the same runs, as kubectl shows them
  %s/agentctl -n %s logs fix-issue-42  # a run's output
  %s/agentctl -n %s events fix-issue-42
  %s/agentctl -n %s run --station bug-fixer --param issue=7 --param repo=acme/shop --follow --wait
  %s/agentctl -n %s describe %s        # the batch run: its batchId, provider and events
  %s/agentctl -n %s get ar -o wide     # the Omnia AgentRuntime, on its new pack version
  %s/agentctl -n %s get pp             # both PromptPack versions, the older Superseded
  NATS subject of every run event: agents.%s.<agent>.<kind> (stream AGENT_EVENTS, %s)
  controller metrics: http://%s/metrics
  %s

Stop it all with: make demo-down   (took %s)
`, kubeconfig, kubectlDir(), bin, demoNamespace, bin, demoNamespace, bin, demoNamespace,
		bin, demoNamespace, scenario.BatchRun, bin, demoNamespace, bin, demoNamespace, demoNamespace, natsURL, controllerAddr, promLine, time.Since(start).Round(time.Second))
	return nil
}

func kubectlDir() string {
	out, err := exec.Command(filepath.Join(cacheRoot(), "bin", "kubestack"), "assets").Output()
	if err != nil {
		return filepath.Join(cacheRoot(), "kube", "<version>")
	}
	return string(out[:len(out)-1])
}

// serveNATS runs a NATS server with JetStream until SIGTERM.
func serveNATS(ctx context.Context, store string) error {
	if store == "" {
		return errors.New("--store is required")
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: natsPort, JetStream: true, StoreDir: store})
	if err != nil {
		return fmt.Errorf("NATS: %w", err)
	}
	ns.ConfigureLogger()
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		return errors.New("NATS did not become ready")
	}
	<-ctx.Done()
	ns.Shutdown()
	ns.WaitForShutdown()
	return nil
}
