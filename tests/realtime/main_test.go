// Package realtime runs realtime Agents end to end: a real kube-apiserver,
// etcd and kube-controller-manager; localnode running the run pod as a
// process (its supervisor serves :8090 on loopback); an embedded NATS
// server; and the agent-controller (realtime component on), supervisor,
// mock CLI and realtime-gateway binaries built from this tree. Callers are
// ServiceAccounts authenticated by a real TokenReview and authorised by a
// real SubjectAccessReview.
package realtime

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/tools/localnode/node"
)

// platformNS holds the key the controller and the gateway share.
const platformNS = "agentplane-system"

var (
	env         *testenv.Env
	natsURL     string
	binDir      string
	work        string
	kubeconfig  string
	gatewayAddr string
	logs        = map[string]string{}
	gateway     *process
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "realtime tests need root: localnode runs pods in private mount namespaces")
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	if work, err = os.MkdirTemp("", "agentplane-realtime-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(work) }()
	binDir = filepath.Join(work, "bin")
	if err := buildBinaries(binDir); err != nil {
		fmt.Fprintf(os.Stderr, "realtime: %v\n", err)
		return 1
	}
	e, err := testenv.Start(ctx, testenv.Options{ControllerManager: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "realtime: %v\n", err)
		return 1
	}
	env = e
	defer func() { _ = e.Stop() }()
	ln, err := node.Start(ctx, node.Config{RESTConfig: e.Config, Name: "localnode", StateDir: filepath.Join(work, "node"),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		fmt.Fprintf(os.Stderr, "realtime: start localnode: %v\n", err)
		return 1
	}
	defer ln.Stop()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(work, "jetstream")})
	if err != nil {
		fmt.Fprintf(os.Stderr, "realtime: nats: %v\n", err)
		return 1
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		fmt.Fprintln(os.Stderr, "realtime: NATS did not start")
		return 1
	}
	defer ns.Shutdown()
	natsURL = ns.ClientURL()

	if err := sharedKey(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "realtime: %v\n", err)
		return 1
	}
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
	ctl, err := startController(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "realtime: %v\n", err)
		return 1
	}
	if gateway, err = startGateway(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "realtime: %v\n", err)
		return 1
	}
	code := m.Run()
	gateway.stop()
	ctl.stop()
	if code != 0 {
		for name, path := range logs {
			dumpLog(name, path)
		}
	}
	return code
}

// sharedKey creates the platform namespace and the key Secret the
// controller derives run tokens with and the gateway calls pods with.
func sharedKey(ctx context.Context) error {
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNS}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	_, err := env.Kube.CoreV1().Secrets(platformNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: realtime.KeySecretName, Namespace: platformNS},
		Data:       map[string][]byte{realtime.KeySecretKey: key},
	}, metav1.CreateOptions{})
	return err
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
		"github.com/agentplane/agentplane/services/realtime-gateway",
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

func startProcess(ctx context.Context, name, bin string, args ...string) (*process, error) {
	path := filepath.Join(work, name+".log")
	logs[name] = path
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{cmd: cmd, log: f, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *process) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
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

func startController(ctx context.Context) (*process, error) {
	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	healthAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return startProcess(ctx, "agent-controller", filepath.Join(binDir, "agent-controller"),
		"--kubeconfig", kubeconfig, "--leader-elect=false", "--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", healthAddr, "--poll-interval", "2s",
		"--supervisor-path", filepath.Join(binDir, "supervisor"), "--nats-url", natsURL, "--log-level", "debug",
		"--realtime-enabled", "--realtime-key-namespace", platformNS)
}

func startGateway(ctx context.Context) (*process, error) {
	var err error
	if gatewayAddr, err = freeAddr(); err != nil {
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
	p, err := startProcess(ctx, "realtime-gateway", filepath.Join(binDir, "realtime-gateway"),
		"--kubeconfig", kubeconfig, "--grpc-bind-address", gatewayAddr, "--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", healthAddr, "--key-secret-namespace", platformNS, "--shutdown-timeout", "2s",
		"--log-level", "debug")
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", gatewayAddr, time.Second); err == nil {
			_ = c.Close()
			return p, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("realtime-gateway not listening on %s", gatewayAddr)
}
