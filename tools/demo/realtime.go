package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/tools/demo/scenario"
)

// The realtime side's addresses: realtime-gateway's gRPC server and its one
// port for /metrics and the probes, and the port a realtime run pod's
// supervisor serves on, which localnode's host network puts on loopback.
const (
	gatewayGRPCAddr  = "127.0.0.1:9092"
	gatewayHTTPAddr  = "127.0.0.1:8083"
	realtimePodAddr  = "127.0.0.1:8090"
	platformNS       = "agentplane-system"
	realtimeReadyFor = 90 * time.Second
)

// startRealtime creates the key Secret the agent-controller derives each
// realtime run's token from and the gateway calls run pods with
// (docs/realtime.md), starts realtime-gateway, and returns the
// agent-controller's flags for realtime runs.
func startRealtime(ctx context.Context, c client.Client, state, bin, kubeconfig string) ([]string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: platformNS}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: realtime.KeySecretName, Namespace: platformNS},
			Data: map[string][]byte{realtime.KeySecretKey: key}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("create %s: %w", obj.GetName(), err)
		}
	}
	if _, err := spawn(state, "realtime-gateway", filepath.Join(bin, "realtime-gateway"), []string{
		"--kubeconfig", kubeconfig, "--grpc-bind-address", gatewayGRPCAddr,
		"--metrics-bind-address", gatewayHTTPAddr, "--health-probe-bind-address", gatewayHTTPAddr,
		"--key-secret-namespace", platformNS, "--shutdown-timeout", "2s",
	}, nil); err != nil {
		return nil, err
	}
	readyz := "http://" + gatewayHTTPAddr + "/readyz"
	if err := newWaiter(300*time.Millisecond).wait(ctx, "realtime-gateway to be ready ("+readyz+")", 30*time.Second, httpOK(readyz)); err != nil {
		return nil, fmt.Errorf("realtime-gateway is not ready (log %s): %w", filepath.Join(state, "logs", "realtime-gateway.log"), err)
	}
	return []string{"--realtime-enabled", "--realtime-key-namespace", platformNS, "--gateway-namespace", platformNS}, nil
}

// showRealtime launches the realtime run, prompts it twice with agentctl,
// closes its session and shows how it ended.
func showRealtime(ctx context.Context, c client.Client, bin, kubeconfig string) error {
	if err := scenario.ApplyRealtime(ctx, c, demoNamespace, os.Stdout); err != nil {
		return err
	}
	if _, err := showStages(ctx, c, scenario.RealtimeRun, []scenario.Stage{scenario.RealtimeRunning}, realtimeReadyFor); err != nil {
		return err
	}
	fmt.Printf("  prompting as serviceaccount/%s through realtime-gateway on %s (a prompt before the session serves is retried)\n", scenario.RealtimeCaller, gatewayGRPCAddr)
	sessions, err := scenario.Converse(ctx, scenario.Agentctl{Bin: filepath.Join(bin, "agentctl"), Gateway: gatewayGRPCAddr,
		Global: []string{"--kubeconfig", kubeconfig, "-n", demoNamespace}}, realtimeReadyFor, os.Stdout)
	if err != nil {
		return err
	}
	a, err := showStages(ctx, c, scenario.RealtimeRun, []scenario.Stage{scenario.RealtimeEnded}, time.Minute)
	if err != nil {
		return err
	}
	if why := scenario.CheckRealtime(a, sessions); why != "" {
		return fmt.Errorf("the realtime run did not end as promised: %s", why)
	}
	fmt.Printf("  both turns kept session %s; the run ended as its recipe promises\n", sessions[0])
	return nil
}
