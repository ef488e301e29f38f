package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/tools/demo/scenario"
)

// realtimeReadyFor bounds the wait for the realtime run to serve.
const realtimeReadyFor = 90 * time.Second

// showRealtime launches the realtime run, prompts it twice with agentctl,
// closes its session and shows how it ended. gateway is realtime-gateway's
// Service's ClusterIP address, its gRPC port.
func showRealtime(ctx context.Context, c client.Client, bin, kubeconfig, gateway string) error {
	if err := scenario.ApplyRealtime(ctx, c, demoNamespace, os.Stdout); err != nil {
		return err
	}
	if _, err := showStages(ctx, c, scenario.RealtimeRun, []scenario.Stage{scenario.RealtimeRunning}, realtimeReadyFor); err != nil {
		return err
	}
	fmt.Printf("  prompting as serviceaccount/%s through realtime-gateway on %s (a prompt before the session serves is retried)\n", scenario.RealtimeCaller, gateway)
	sessions, err := scenario.Converse(ctx, scenario.Agentctl{Bin: filepath.Join(bin, "agentctl"), Gateway: gateway,
		Global: []string{"--kubeconfig", kubeconfig, "-n", demoNamespace},
		// The demo's gateway serves plaintext gRPC on its ClusterIP, which
		// only this host reaches.
		GatewayFlags: []string{"--insecure"}}, realtimeReadyFor, os.Stdout)
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
