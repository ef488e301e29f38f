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
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentplane/agentplane/tests/internal/stack"
	"github.com/agentplane/agentplane/tools/fakevendor"
)

const (
	timeoutUnit    = 2 * time.Second
	pollPeriod     = 500 * time.Millisecond
	controllerPoll = time.Second
	// apiKey is the key fakevendor accepts; tests put it in agent-secrets.
	apiKey = "sk-test-batch"
)

var (
	// suite is the stack the suite runs on (stack.Main starts it).
	suite *stack.Stack
	// natsOpts connects a NATS client with the suite's service credential.
	natsOpts   []nats.Option
	vendor     *fakevendor.Server
	vendorURL  string
	pollerAddr string
	pollerLog  string
	// pollerAuth and controllerAuth are the flags of the caller
	// batch-poller admits (stack.BatchCaller).
	pollerAuth, controllerAuth []string
	// replicas are the running agent-controller processes by identity.
	replicas   sync.Map
	replicaLog = map[string]string{}
	// replicaAddr is each replica's --metrics-bind-address.
	replicaAddr = map[string]string{}
)

func TestMain(m *testing.M) {
	stack.Main(stack.Options{
		Suite: "batch", RootReason: "localnode runs fallback Jobs in private mount namespaces", KubeUser: "agentplane",
		Packages: []string{"services/agent-controller", "services/batch-poller", "services/supervisor", "tools/mockagent"},
	}, func(ctx context.Context, s *stack.Stack) int {
		suite, natsOpts = s, s.NATS.Options()
		return run(ctx, m)
	})
}

// run starts the suite's own processes and runs its tests.
func run(ctx context.Context, m *testing.M) int {
	var err error
	vendor = fakevendor.New(fakevendor.Options{APIKey: apiKey, PollsUntilEnded: 2})
	if vendorURL, err = vendor.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "batch: fakevendor: %v\n", err)
		return 1
	}
	defer func() { _ = vendor.Close() }()

	if pollerAuth, controllerAuth, err = stack.BatchCaller(ctx, suite.Env.Kube); err != nil {
		fmt.Fprintf(os.Stderr, "batch: %v\n", err)
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
		v.(*stack.Process).Stop()
		return true
	})
	stopPoller()
	if code != 0 {
		stack.DumpLog("batch-poller", pollerLog, 40)
		for id, path := range replicaLog {
			stack.DumpLog("agent-controller "+id, path, 40)
		}
	}
	return code
}

func startPoller(ctx context.Context) (func(), error) {
	addrs, err := stack.FreeAddrs(3)
	if err != nil {
		return nil, err
	}
	pollerAddr = addrs[0]
	pollerLog = filepath.Join(suite.Work, "batch-poller.log")
	p, err := stack.StartProcess(ctx, pollerLog, filepath.Join(suite.BinDir, "batch-poller"), append([]string{
		"--grpc-bind-address", pollerAddr, "--metrics-bind-address", addrs[1], "--health-probe-bind-address", addrs[2],
		"--kubeconfig", suite.Kubeconfig, "--batch-poll-seconds", fmt.Sprint(pollPeriod.Seconds()),
		"--anthropic-base-url", vendorURL + "/", "--openai-base-url", vendorURL + "/v1/", "--gemini-base-url", vendorURL + "/"},
		append(pollerAuth, suite.NATS.ServiceArgs()...)...)...)
	if err != nil {
		return nil, err
	}
	if err := stack.WaitListening(pollerAddr, p); err != nil {
		return nil, fmt.Errorf("batch-poller: %w", err)
	}
	return p.Stop, nil
}

// startReplica runs one agent-controller replica with the batch component
// on, contending for the Lease with short timings.
func startReplica(ctx context.Context, id string) error {
	addrs, err := stack.FreeAddrs(2)
	if err != nil {
		return err
	}
	metricsAddr, healthAddr := addrs[0], addrs[1]
	path := filepath.Join(suite.Work, "agent-controller-"+id+".log")
	replicaLog[id] = path
	replicaAddr[id] = metricsAddr
	p, err := stack.StartProcess(ctx, path, filepath.Join(suite.BinDir, "agent-controller"), append([]string{
		"--kubeconfig", suite.Kubeconfig, "--pod-name", id, "--leader-elect=true", "--leader-election-namespace", "default",
		"--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms",
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", healthAddr,
		"--poll-interval", "2s", "--supervisor-path", filepath.Join(suite.BinDir, "supervisor"),
		"--log-level", "debug",
		"--batch-enabled", "--batch-poller-address", pollerAddr, "--batch-poll-seconds", fmt.Sprint(controllerPoll.Seconds()),
		"--batch-timeout-unit", timeoutUnit.String(), "--batch-cleanup-backoff", "200ms"}, append(controllerAuth, suite.NATS.ControllerArgs()...)...)...)
	if err != nil {
		return err
	}
	replicas.Store(id, p)
	return nil
}
