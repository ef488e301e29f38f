// Package e2e runs agentplane end to end on one machine, with nothing
// faked: a real kube-apiserver, etcd and kube-controller-manager; localnode
// running pods as processes; an embedded NATS server with JetStream; the
// agent-controller and supervisor binaries as built from this tree; and the
// mock vendor CLIs printing each vendor's real event lines.
//
// Agent → Job → localnode pod → supervisor init (bundle) → supervisor run →
// mock CLI → sinks and NATS → pods/log → Agent status. The demo's batch
// run goes Agent → batch-poller → tools/fakevendor behind the vendor SDKs
// → Agent status, with the controller's batch component on; its realtime
// run is prompted with agentctl through realtime-gateway; its Omnia
// AgentRuntime runs mockagent's Omnia runtime stand-in under
// omnia-controllers.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/tests/internal/stack"
)

var (
	env     *testenv.Env
	natsURL string
	// natsAuth is what the suite's NATS clients authenticate with, and
	// natsOpts connects one with its service credential.
	natsAuth   *stack.NATS
	natsOpts   []nats.Option
	binDir     string
	ctlLog     string
	kubeconfig string
	metricsURL string
)

func TestMain(m *testing.M) {
	// The binaries: the agent-controller, the supervisor, agentctl, and
	// the mock CLIs, laid out as the supervisor bundle.
	stack.Main(stack.Options{
		Suite: "e2e", RootReason: "localnode runs containers in private mount namespaces", KubeUser: "agent-controller",
		Packages: []string{"services/agent-controller", "services/supervisor", "tools/mockagent", "tools/agentctl", "services/batch-poller", "services/realtime-gateway",
			"services/omnia-controllers/cmd/omnia-controllers"},
	}, func(ctx context.Context, s *stack.Stack) int {
		env, binDir, natsURL, kubeconfig = s.Env, s.BinDir, s.NATSURL, s.Kubeconfig
		natsAuth, natsOpts = s.NATS, s.NATS.Options()
		return run(ctx, m, s.Work)
	})
}

// run starts the demo's batch, realtime and Omnia sides
// (demo_*_test.go) and the agent-controller, and runs the tests.
func run(ctx context.Context, m *testing.M, work string) int {
	batchArgs, stopBatch, err := startBatch(ctx, work)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer stopBatch()
	// The demo's realtime run binds the node's 127.0.0.1:8090, as the
	// realtime suite's runs do.
	unlock, err := stack.LockRealtimePort()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer unlock()
	realtimeArgs, stopRealtime, err := startRealtime(ctx, work)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer stopRealtime()
	stopOmnia, err := startOmnia(ctx, work)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer stopOmnia()
	ctl, err := startController(ctx, work, append(batchArgs, realtimeArgs...))
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	code := m.Run()
	ctl.Stop()
	if code != 0 {
		stack.DumpLog("agent-controller", ctlLog, 30)
		stack.DumpLog("batch-poller", pollerLog, 30)
		stack.DumpLog("realtime-gateway", gatewayLog, 30)
		stack.DumpLog("omnia-controllers", omniaLog, 30)
	}
	return code
}

// startController runs the agent-controller binary against the control
// plane, serving metrics and probes on one address.
func startController(ctx context.Context, work string, extra []string) (*stack.Process, error) {
	addrs, err := stack.FreeAddrs(1)
	if err != nil {
		return nil, err
	}
	addr := addrs[0]
	metricsURL = "http://" + addr + "/metrics"
	ctlLog = filepath.Join(work, "agent-controller.log")
	return stack.StartProcess(ctx, ctlLog, filepath.Join(binDir, "agent-controller"), append([]string{
		"--kubeconfig", kubeconfig, "--leader-elect=false", "--metrics-bind-address", addr, "--health-probe-bind-address", addr, "--poll-interval", "2s",
		"--supervisor-path", filepath.Join(binDir, "supervisor"), "--log-level", "debug"}, append(extra, natsAuth.ControllerArgs()...)...)...)
}
