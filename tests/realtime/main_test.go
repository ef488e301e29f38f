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
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentplane/agentplane/tests/internal/stack"
)

// platformNS holds the key the controller and the gateway share.
const platformNS = "agentplane-system"

var (
	// suite is the stack the suite runs on (stack.Main starts it).
	suite *stack.Stack
	// natsOpts connects a NATS client with the suite's service credential.
	natsOpts    []nats.Option
	gatewayAddr string
	logs        = map[string]string{}
	gateway     *stack.Process
)

func TestMain(m *testing.M) {
	stack.Main(stack.Options{
		Suite: "realtime", RootReason: "localnode runs pods in private mount namespaces", KubeUser: "agentplane",
		Packages: []string{"services/agent-controller", "services/realtime-gateway", "services/supervisor", "tools/mockagent"},
	}, func(ctx context.Context, s *stack.Stack) int {
		suite, natsOpts = s, s.NATS.Options()
		return run(ctx, m)
	})
}

// run starts the suite's own processes and runs its tests.
func run(ctx context.Context, m *testing.M) int {
	// Every test here runs a realtime pod on the node's 127.0.0.1:8090.
	unlock, err := stack.LockRealtimePort()
	if err != nil {
		fmt.Fprintf(os.Stderr, "realtime: %v\n", err)
		return 1
	}
	defer unlock()
	if err = stack.CreateRealtimeKey(ctx, suite.Env.Kube, platformNS); err != nil {
		fmt.Fprintf(os.Stderr, "realtime: %v\n", err)
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
	gateway.StopWithin(15 * time.Second)
	ctl.StopWithin(15 * time.Second)
	if code != 0 {
		for name, path := range logs {
			stack.DumpLog(name, path, 40)
		}
	}
	return code
}

// startProcess starts the binary name of suite.BinDir, logging to a file
// that logs records for the dump after a failure.
func startProcess(ctx context.Context, name string, args ...string) (*stack.Process, error) {
	path := filepath.Join(suite.Work, name+".log")
	logs[name] = path
	return stack.StartProcess(ctx, path, filepath.Join(suite.BinDir, name), args...)
}

func startController(ctx context.Context) (*stack.Process, error) {
	addrs, err := stack.FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	return startProcess(ctx, "agent-controller", append([]string{
		"--kubeconfig", suite.Kubeconfig, "--leader-elect=false", "--metrics-bind-address", addrs[0],
		"--health-probe-bind-address", addrs[1], "--poll-interval", "2s",
		"--supervisor-path", filepath.Join(suite.BinDir, "supervisor"), "--log-level", "debug",
		"--realtime-enabled", "--realtime-key-namespace", platformNS,
		// The run pods' NetworkPolicies admit the gateway where the charts
		// install it (netpol_test.go).
		"--gateway-namespace", platformNS}, suite.NATS.ControllerArgs()...)...)
}

func startGateway(ctx context.Context) (*stack.Process, error) {
	addrs, err := stack.FreeAddrs(3)
	if err != nil {
		return nil, err
	}
	gatewayAddr = addrs[0]
	p, err := startProcess(ctx, "realtime-gateway",
		"--kubeconfig", suite.Kubeconfig, "--grpc-bind-address", gatewayAddr, "--metrics-bind-address", addrs[1],
		"--health-probe-bind-address", addrs[2], "--key-secret-namespace", platformNS, "--shutdown-timeout", "2s",
		"--log-level", "debug")
	if err != nil {
		return nil, err
	}
	if err := stack.WaitListening(gatewayAddr, p); err != nil {
		return nil, fmt.Errorf("realtime-gateway: %w", err)
	}
	return p, nil
}
