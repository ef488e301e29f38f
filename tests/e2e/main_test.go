// Package e2e runs agentplane end to end on one machine, with nothing
// faked: a real kube-apiserver, etcd and kube-controller-manager; localnode
// running pods as processes; an embedded NATS server with JetStream; the
// agent-controller and supervisor binaries as built from this tree; and the
// mock vendor CLIs printing each vendor's real event lines.
//
// Agent → Job → localnode pod → supervisor init (bundle) → supervisor run →
// mock CLI → sinks and NATS → pods/log → Agent status.
package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/tools/localnode/node"
)

var (
	env        *testenv.Env
	natsURL    string
	binDir     string
	ctlLog     string
	kubeconfig string
	metricsURL string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e tests need root: localnode runs containers in private mount namespaces")
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	work, err := os.MkdirTemp("", "agentplane-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(work) }()
	binDir = filepath.Join(work, "bin")
	if err := buildBinaries(binDir); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}

	e, err := testenv.Start(ctx, testenv.Options{ControllerManager: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	env = e
	defer func() { _ = e.Stop() }()

	ln, err := node.Start(ctx, node.Config{RESTConfig: e.Config, Name: "localnode", StateDir: filepath.Join(work, "node"),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: start localnode: %v\n", err)
		return 1
	}
	defer ln.Stop()

	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(work, "jetstream")})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: nats: %v\n", err)
		return 1
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		fmt.Fprintln(os.Stderr, "e2e: NATS did not start")
		return 1
	}
	defer ns.Shutdown()
	natsURL = ns.ClientURL()

	stopCtl, err := startController(ctx, work)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	code := m.Run()
	stopCtl()
	if code != 0 {
		if raw, err := os.ReadFile(ctlLog); err == nil {
			fmt.Fprintf(os.Stderr, "--- agent-controller log (tail)\n%s\n", tail(string(raw), 30))
		}
	}
	return code
}

// buildBinaries builds the agent-controller, the supervisor and the mock
// CLIs, and lays out the supervisor bundle: the mock CLIs in bundle/ beside
// the supervisor, which `supervisor init` copies into the run's /agent/bin.
func buildBinaries(dir string) error {
	for _, pkg := range []string{
		"github.com/agentplane/agentplane/services/agent-controller",
		"github.com/agentplane/agentplane/services/supervisor",
		"github.com/agentplane/agentplane/tools/mockagent",
		"github.com/agentplane/agentplane/tools/agentctl",
	} {
		cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %w\n%s", pkg, err, out)
		}
	}
	out, err := exec.Command(filepath.Join(dir, "mockagent"), "install", filepath.Join(dir, "bundle")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("install mock CLIs: %w\n%s", err, out)
	}
	return nil
}

// startController runs the agent-controller binary against the control
// plane and returns how to stop it.
func startController(ctx context.Context, work string) (func(), error) {
	kc, err := env.KubeconfigFor("agent-controller")
	if err != nil {
		return nil, err
	}
	kcPath := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		return nil, err
	}
	kubeconfig = kcPath
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	metricsURL = "http://" + addr + "/metrics"
	ctlLog = filepath.Join(work, "agent-controller.log")
	logFile, err := os.Create(ctlLog)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "agent-controller"),
		"--kubeconfig", kcPath, "--leader-elect=false", "--metrics-bind-address", addr, "--health-probe-bind-address", addr, "--poll-interval", "2s",
		"--supervisor-path", filepath.Join(binDir, "supervisor"), "--nats-url", natsURL, "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent-controller: %w", err)
	}
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
		_ = logFile.Close()
	}, nil
}

func tail(s string, n int) string {
	lines := splitLines(s)
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
