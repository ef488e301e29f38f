// Package batch runs batch Agents end to end: a real kube-apiserver, etcd
// and kube-controller-manager; localnode for fallback Jobs; an embedded
// NATS server with JetStream; tools/fakevendor behind the three vendors'
// official SDKs; and the batch-poller, agent-controller (two replicas under
// leader election) and supervisor binaries built from this tree.
//
// Times are shortened so every rule of docs/agent-controller.md "Batch runs" is seen in
// seconds: one batch.timeoutMinutes counts timeoutUnit, batch-poller polls
// every pollPeriod, and the controller looks at a run every controllerPoll.
package batch

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/tools/fakevendor"
	"github.com/agentplane/agentplane/tools/localnode/node"
)

const (
	timeoutUnit    = 2 * time.Second
	pollPeriod     = 500 * time.Millisecond
	controllerPoll = time.Second
	// apiKey is the key fakevendor accepts; tests put it in agent-secrets.
	apiKey = "sk-test-batch"
)

var (
	env        *testenv.Env
	natsURL    string
	binDir     string
	work       string
	kubeconfig string
	vendor     *fakevendor.Server
	vendorURL  string
	pollerAddr string
	pollerLog  string
	// replicas are the running agent-controller processes by identity.
	replicas   sync.Map
	replicaLog = map[string]string{}
	// replicaAddr is each replica's --metrics-bind-address.
	replicaAddr = map[string]string{}
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "batch tests need root: localnode runs fallback Jobs in private mount namespaces")
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	work, err = os.MkdirTemp("", "agentplane-batch-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(work) }()
	binDir = filepath.Join(work, "bin")
	if err := buildBinaries(binDir); err != nil {
		fmt.Fprintf(os.Stderr, "batch: %v\n", err)
		return 1
	}
	e, err := testenv.Start(ctx, testenv.Options{ControllerManager: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "batch: %v\n", err)
		return 1
	}
	env = e
	defer func() { _ = e.Stop() }()
	ln, err := node.Start(ctx, node.Config{RESTConfig: e.Config, Name: "localnode", StateDir: filepath.Join(work, "node"),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		fmt.Fprintf(os.Stderr, "batch: start localnode: %v\n", err)
		return 1
	}
	defer ln.Stop()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(work, "jetstream")})
	if err != nil {
		fmt.Fprintf(os.Stderr, "batch: nats: %v\n", err)
		return 1
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		fmt.Fprintln(os.Stderr, "batch: NATS did not start")
		return 1
	}
	defer ns.Shutdown()
	natsURL = ns.ClientURL()

	vendor = fakevendor.New(fakevendor.Options{APIKey: apiKey, PollsUntilEnded: 2})
	if vendorURL, err = vendor.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "batch: fakevendor: %v\n", err)
		return 1
	}
	defer func() { _ = vendor.Close() }()

	kc, err := e.KubeconfigFor("agentplane")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubeconfig = filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stopPoller, err := startPoller(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "batch: %v\n", err)
		return 1
	}
	for _, id := range []string{"ctl-a", "ctl-b"} {
		if err := startReplica(ctx, id); err != nil {
			fmt.Fprintf(os.Stderr, "batch: %v\n", err)
			return 1
		}
	}
	code := m.Run()
	replicas.Range(func(k, v any) bool {
		v.(*process).stop()
		return true
	})
	stopPoller()
	if code != 0 {
		dumpLog("batch-poller", pollerLog)
		for id, path := range replicaLog {
			dumpLog("agent-controller "+id, path)
		}
	}
	return code
}

func dumpLog(name, path string) {
	if raw, err := os.ReadFile(path); err == nil {
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Fprintf(os.Stderr, "--- %s log (tail)\n%s\n", name, strings.Join(lines, "\n"))
	}
}

func buildBinaries(dir string) error {
	for _, pkg := range []string{
		"github.com/agentplane/agentplane/services/agent-controller",
		"github.com/agentplane/agentplane/services/batch-poller",
		"github.com/agentplane/agentplane/services/supervisor",
		"github.com/agentplane/agentplane/tools/mockagent",
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

// process is a started binary.
type process struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

func startProcess(ctx context.Context, logPath, bin string, args ...string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	p := &process{cmd: cmd, log: f, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop ends the process with SIGINT, then SIGKILL.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.log.Close()
}

// kill ends the process at once, as a crash would.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
	_ = p.log.Close()
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

func startPoller(ctx context.Context) (func(), error) {
	var err error
	if pollerAddr, err = freeAddr(); err != nil {
		return nil, err
	}
	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	healthAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	pollerLog = filepath.Join(work, "batch-poller.log")
	p, err := startProcess(ctx, pollerLog, filepath.Join(binDir, "batch-poller"),
		"--grpc-bind-address", pollerAddr, "--metrics-bind-address", metricsAddr, "--health-probe-bind-address", healthAddr,
		"--kubeconfig", kubeconfig, "--batch-poll-seconds", fmt.Sprint(pollPeriod.Seconds()), "--nats-url", natsURL,
		"--anthropic-base-url", vendorURL+"/", "--openai-base-url", vendorURL+"/v1/", "--gemini-base-url", vendorURL+"/")
	if err != nil {
		return nil, err
	}
	if err := waitListening(pollerAddr, p); err != nil {
		return nil, fmt.Errorf("batch-poller: %w", err)
	}
	return p.stop, nil
}

func waitListening(addr string, p *process) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("exited before listening on %s", addr)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not listening on %s after 30s", addr)
}

// startReplica runs one agent-controller replica with the batch component
// on, contending for the Lease with short timings.
func startReplica(ctx context.Context, id string) error {
	metricsAddr, err := freeAddr()
	if err != nil {
		return err
	}
	healthAddr, err := freeAddr()
	if err != nil {
		return err
	}
	path := filepath.Join(work, "agent-controller-"+id+".log")
	replicaLog[id] = path
	replicaAddr[id] = metricsAddr
	p, err := startProcess(ctx, path, filepath.Join(binDir, "agent-controller"),
		"--kubeconfig", kubeconfig, "--pod-name", id, "--leader-elect=true", "--leader-election-namespace", "default",
		"--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms",
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", healthAddr,
		"--poll-interval", "2s", "--supervisor-path", filepath.Join(binDir, "supervisor"),
		"--nats-url", natsURL, "--log-level", "debug",
		"--batch-enabled", "--batch-poller-address", pollerAddr, "--batch-poll-seconds", fmt.Sprint(controllerPoll.Seconds()),
		"--batch-timeout-unit", timeoutUnit.String(), "--batch-cleanup-backoff", "200ms")
	if err != nil {
		return err
	}
	replicas.Store(id, p)
	return nil
}
