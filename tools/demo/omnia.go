package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/tools/demo/scenario"
)

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
			return fmt.Errorf("%w (see: kubectl -n %s logs deployment/omnia-controllers; kubectl -n %s get pods)", err, platformNS, demoNamespace)
		}
		fmt.Printf("  %-15s ── %s: %s\n", scenario.OmniaRuntime, st.What, st.Show(s))
	}
	return nil
}
