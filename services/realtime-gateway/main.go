// Command realtime-gateway serves realtime.v1.PromptService, the public
// gRPC prompt API of realtime runs: it authenticates callers with
// TokenReview, authorises them with SubjectAccessReview on agents/prompt,
// finds the Running realtime Agent's pod and forwards prompts, closes and
// session queries to its supervisor with the run's token.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentplane/agentplane/services/realtime-gateway/internal/app"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/config"
)

func main() {
	cfg, err := config.Parse(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "realtime-gateway: %v\n", err)
		os.Exit(2)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("realtime-gateway stopped", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("kubernetes client config: %w", err)
	}
	rc.QPS, rc.Burst = float32(cfg.QPS), cfg.Burst
	grpcLis, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("--grpc-addr: %w", err)
	}
	httpLis, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	// The watches outlive ctx by the shutdown: in-flight streams still
	// route and record session ids during the grace.
	watchCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := app.New(watchCtx, cfg, rc, log, nil)
	if err != nil {
		return err
	}
	return a.Serve(ctx, grpcLis, httpLis)
}
