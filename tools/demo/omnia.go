package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/tools/demo/scenario"
)

// omniaHTTPAddr is omnia-controllers' one port for /metrics and the probes.
const omniaHTTPAddr = "127.0.0.1:8084"

// startOmnia starts omnia-controllers. The agent pods it builds run
// runtime (the demo binary's `runtime` command, staged where the pods'
// user may run it) in place of the Omnia runtime image, which localnode
// runs on the host since no image store holds it.
func startOmnia(ctx context.Context, state, bin, kubeconfig, runtime string) error {
	if _, err := spawn(state, "omnia-controllers", filepath.Join(bin, "omnia-controllers"), []string{
		"--kubeconfig", kubeconfig, "--leader-elect=false",
		"--metrics-bind-address", omniaHTTPAddr, "--health-probe-bind-address", omniaHTTPAddr,
		"--runtime-image", "agentplane/omnia-runtime:demo", "--runtime-command", runtime + ",runtime",
		// The demo's Provider is a mock: there is no vendor key to probe.
		"--provider-credential-probe=false",
	}, nil); err != nil {
		return err
	}
	readyz := "http://" + omniaHTTPAddr + "/readyz"
	if err := newWaiter(300*time.Millisecond).wait(ctx, "omnia-controllers to be ready ("+readyz+")", 30*time.Second, httpOK(readyz)); err != nil {
		return fmt.Errorf("omnia-controllers is not ready (log %s): %w", filepath.Join(state, "logs", "omnia-controllers.log"), err)
	}
	return nil
}

// showOmnia creates the PromptPack and the AgentRuntime, waits for it to
// run, publishes the pack's next version and shows its rollout step by
// step, with each message the rollout engine writes.
func showOmnia(ctx context.Context, c client.Client) error {
	if err := scenario.ApplyOmnia(ctx, c, demoNamespace, os.Stdout); err != nil {
		return err
	}
	seen := ""
	if err := showOmniaStages(ctx, c, []scenario.OmniaStage{scenario.OmniaRunning}, &seen); err != nil {
		return err
	}
	if err := scenario.PublishNextPack(ctx, c, demoNamespace, os.Stdout); err != nil {
		return err
	}
	if err := showOmniaStages(ctx, c, scenario.OmniaRolloutStages, &seen); err != nil {
		return err
	}
	fmt.Printf("  agentruntime/%s rolled out pack %s step by step\n", scenario.OmniaRuntime, scenario.OmniaNextPack)
	return nil
}

// showOmniaStages waits for each stage in turn, printing each as it is
// reached and every new status.rollout.message meanwhile (seen holds the
// last one printed).
func showOmniaStages(ctx context.Context, c client.Client, stages []scenario.OmniaStage, seen *string) error {
	for _, st := range stages {
		var s scenario.OmniaState
		err := newWaiter(300*time.Millisecond).wait(ctx, scenario.OmniaRuntime+" to be "+st.What, 2*time.Minute, func(ctx context.Context) error {
			var err error
			if s, err = scenario.ReadOmnia(ctx, c, demoNamespace); err != nil {
				return err
			}
			if ro := s.Runtime.Status.Rollout; ro != nil && ro.Message != "" && ro.Message != *seen {
				*seen = ro.Message
				fmt.Printf("  %-15s   rollout: %s\n", scenario.OmniaRuntime, ro.Message)
			}
			if !st.Reached(s) {
				return errors.New(string(s.Runtime.Status.Phase) + "; " + s.Describe())
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%w (omnia-controllers log: %s)", err, filepath.Join(cacheRoot(), "demo", "state", "logs", "omnia-controllers.log"))
		}
		fmt.Printf("  %-15s ── %s: %s\n", scenario.OmniaRuntime, st.What, st.Show(s))
	}
	return nil
}
