// Package observability proves the dashboards and alert rules on a real
// Prometheus server: the whole platform runs on one machine (a real
// kube-apiserver, etcd and kube-controller-manager; localnode; NATS with
// JetStream; fakevendor behind the vendors' SDKs; agent-controller with its
// batch and realtime components, batch-poller, realtime-gateway and
// omnia-controllers built from this tree), Prometheus scrapes all four
// services and evaluates the rules of deploy/prometheus, and the tests
// drive Job, batch and realtime runs and Omnia objects through it before
// they query every dashboard panel (deploy/dashboards) and check each rule.
//
// Prometheus is Debian's `prometheus` package (make prometheus installs it);
// PROMETHEUS_BIN and PROMTOOL_BIN name other binaries.
package observability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentplane/agentplane/tests/internal/stack"
	"github.com/agentplane/agentplane/tools/fakevendor"
)

const (
	// platformNS holds the realtime key the controller and the gateway share.
	platformNS = "agentplane-system"
	// apiKey is the key fakevendor accepts.
	apiKey = "sk-test-observability"
)

var (
	// suite is the stack the suite runs on (stack.Main starts it).
	suite *stack.Stack
	// natsOpts connects a NATS client with the suite's service credential.
	natsOpts []nats.Option
	// targets are the services' /metrics addresses by scrape job name.
	targets = map[string]string{}
	logs    = map[string]string{}
	// gatewayAddr is realtime-gateway's gRPC address.
	gatewayAddr string
	prom        *prometheus
)

func TestMain(m *testing.M) {
	stack.Main(stack.Options{
		Suite: "observability", RootReason: "localnode runs pods in private mount namespaces", KubeUser: "agentplane",
		Packages: []string{"services/agent-controller", "services/batch-poller", "services/realtime-gateway",
			"services/omnia-controllers/cmd/omnia-controllers", "services/supervisor", "tools/mockagent"},
	}, func(ctx context.Context, s *stack.Stack) int {
		suite, natsOpts = s, s.NATS.Options()
		code, err := run(ctx, m)
		if err != nil {
			fmt.Fprintf(os.Stderr, "observability: %v\n", err)
			return 1
		}
		return code
	})
}

// run starts fakevendor, the four services and Prometheus, then the tests.
func run(ctx context.Context, m *testing.M) (int, error) {
	vendor := fakevendor.New(fakevendor.Options{APIKey: apiKey, PollsUntilEnded: 2})
	vendorURL, err := vendor.Start()
	if err != nil {
		return 0, fmt.Errorf("fakevendor: %w", err)
	}
	defer func() { _ = vendor.Close() }()
	if err := stack.CreateRealtimeKey(ctx, suite.Env.Kube, platformNS); err != nil {
		return 0, err
	}
	var procs []*stack.Process
	defer func() {
		for _, p := range procs {
			p.StopWithin(15 * time.Second)
		}
	}()
	for _, start := range []func(context.Context, string) (*stack.Process, error){
		startPoller, startController, startGateway, startOmnia,
	} {
		p, err := start(ctx, vendorURL)
		if err != nil {
			return 0, err
		}
		procs = append(procs, p)
	}
	if prom, err = startPrometheus(ctx, filepath.Join(suite.Work, "prometheus"), targets); err != nil {
		return 0, err
	}
	defer prom.stop()
	code := m.Run()
	if code != 0 {
		for name, path := range logs {
			stack.DumpLog(name, path, 40)
		}
		stack.DumpLog("prometheus", prom.log, 40)
	}
	return code, nil
}

// startService starts the binary job of suite.BinDir with its metrics on a free
// address, registered as the scrape target of job.
func startService(ctx context.Context, job string, args ...string) (*stack.Process, error) {
	addrs, err := stack.FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	targets[job] = addrs[0]
	path := filepath.Join(suite.Work, job+".log")
	logs[job] = path
	args = append(args, "--kubeconfig", suite.Kubeconfig, "--metrics-bind-address", addrs[0], "--health-probe-bind-address", addrs[1])
	p, err := stack.StartProcess(ctx, path, filepath.Join(suite.BinDir, job), args...)
	if err != nil {
		return nil, err
	}
	if err := stack.WaitListening(addrs[0], p); err != nil {
		return nil, fmt.Errorf("%s: %w", job, err)
	}
	return p, nil
}

var (
	pollerAddr string
	// controllerAuth are agent-controller's flags for the caller
	// batch-poller admits (stack.BatchCaller).
	controllerAuth []string
)

func startPoller(ctx context.Context, vendorURL string) (*stack.Process, error) {
	addrs, err := stack.FreeAddrs(1)
	if err != nil {
		return nil, err
	}
	pollerAddr = addrs[0]
	pollerAuth, ctlAuth, err := stack.BatchCaller(ctx, suite.Env.Kube)
	if err != nil {
		return nil, err
	}
	controllerAuth = ctlAuth
	return startService(ctx, "batch-poller", append([]string{"--grpc-bind-address", pollerAddr, "--batch-poll-seconds", "0.5",
		"--anthropic-base-url", vendorURL + "/", "--openai-base-url", vendorURL + "/v1/", "--gemini-base-url", vendorURL + "/"},
		append(pollerAuth, suite.NATS.ServiceArgs()...)...)...)
}

func startController(ctx context.Context, _ string) (*stack.Process, error) {
	return startService(ctx, "agent-controller", append([]string{"--leader-elect=false", "--poll-interval", "2s",
		"--supervisor-path", filepath.Join(suite.BinDir, "supervisor"), "--log-level", "debug",
		"--batch-enabled", "--batch-poller-address", pollerAddr, "--batch-poll-seconds", "1", "--batch-timeout-unit", "2s",
		"--realtime-enabled", "--realtime-key-namespace", platformNS}, append(controllerAuth, suite.NATS.ControllerArgs()...)...)...)
}

func startGateway(ctx context.Context, _ string) (*stack.Process, error) {
	addrs, err := stack.FreeAddrs(1)
	if err != nil {
		return nil, err
	}
	gatewayAddr = addrs[0]
	p, err := startService(ctx, "realtime-gateway", "--grpc-bind-address", gatewayAddr,
		"--key-secret-namespace", platformNS, "--shutdown-timeout", "2s")
	if err != nil {
		return nil, err
	}
	return p, stack.WaitListening(gatewayAddr, p)
}

func startOmnia(ctx context.Context, _ string) (*stack.Process, error) {
	// With leader election, as installed: its leader gauge is on a dashboard.
	return startService(ctx, "omnia-controllers", "--leader-elect=true", "--leader-election-namespace", "default",
		"--pod-name", "omnia-0", "--provider-credential-probe=false")
}
