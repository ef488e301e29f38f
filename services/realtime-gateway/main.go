// Command realtime-gateway serves realtime.v1.PromptService, the public
// gRPC prompt API of realtime runs: it authenticates callers with
// TokenReview, authorises them with SubjectAccessReview on agents/prompt,
// finds the Running realtime Agent's pod and forwards prompts, closes and
// session queries to its supervisor with the run's token.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/agentplane/agentplane/libs/service"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/app"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/config"
)

func main() {
	cfg, err := config.Parse(os.Args[1:], os.Getenv, os.Stdout)
	switch {
	case errors.Is(err, service.ErrVersion), errors.Is(err, service.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintf(os.Stderr, "%s: %v\n", config.Name, err)
		os.Exit(2)
	}
	log, err := service.NewLogger(config.Name, cfg.LogLevel, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: --log-level / LOG_LEVEL: %v\n", config.Name, err)
		os.Exit(2)
	}
	if err := runUntilSignalled(cfg, log); err != nil {
		log.Error("realtime-gateway stopped", "err", err)
		os.Exit(1)
	}
}

// runUntilSignalled runs the gateway until SIGINT or SIGTERM. It is apart
// from main so the signal handler is released (by the deferred stop)
// before main calls os.Exit, which skips deferred calls.
func runUntilSignalled(cfg *config.Config, log *slog.Logger) error {
	ctx, stop := service.SignalContext()
	defer stop()
	return run(ctx, cfg, log)
}

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
