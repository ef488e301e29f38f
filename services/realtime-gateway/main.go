// Command realtime-gateway serves realtime.v1.PromptService, the public
// gRPC prompt API of realtime runs: it authenticates callers with
// TokenReview, authorises them with SubjectAccessReview on agents/prompt,
// finds the Running realtime Agent's pod and forwards prompts, closes and
// session queries to its supervisor with the run's token.
package main

import (
	"context"
	"log/slog"

	"github.com/agentplane/agentplane/libs/service"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/app"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/config"
)

func main() { service.Main(config.Name, config.Parse, run) }

func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	rc, err := service.RESTConfig(config.Name, cfg.Kube)
	if err != nil {
		return err
	}
	// The watches outlive ctx by the shutdown: in-flight streams still
	// route and record session ids during the shutdown timeout. So they
	// keep ctx's values but not its cancellation, and end when run returns.
	watchCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	a, err := app.New(watchCtx, cfg, rc, log, nil)
	if err != nil {
		return err
	}
	if err := a.Listen(ctx); err != nil {
		return err
	}
	return a.Serve(ctx)
}
