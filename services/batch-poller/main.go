// Command batch-poller is the vendor batch gateway: it serves
// agentplane.batch.v1.BatchService over gRPC, submits batch runs to the
// Anthropic, OpenAI and Gemini batch APIs with each namespace's API key,
// polls them at most once per poll period, and publishes a NATS notice
// when one ends.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	// The image is FROM scratch, without a CA bundle: the vendors' HTTPS
	// APIs are verified against these roots when the system has none.
	_ "golang.org/x/crypto/x509roots/fallback"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentplane/agentplane/libs/events"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"

	"github.com/agentplane/agentplane/services/batch-poller/internal/config"
	"github.com/agentplane/agentplane/services/batch-poller/internal/keys"
	"github.com/agentplane/agentplane/services/batch-poller/internal/metrics"
	"github.com/agentplane/agentplane/services/batch-poller/internal/server"
	"github.com/agentplane/agentplane/services/batch-poller/internal/tracker"
	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

func main() {
	cfg, err := config.Parse(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "batch-poller: %v\n", err)
		os.Exit(2)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("batch-poller stopped", "error", err)
		os.Exit(1)
	}
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return rest.InClusterConfig()
}

func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	rc, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubernetes client config: %w", err)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("clientset: %w", err)
	}
	src := keys.New(kube)
	src.Start(ctx)

	var publish func(*eventsv1.RunEvent) error
	if cfg.NATSURL != "" {
		// Notices are fire and forget; keep reconnecting forever rather
		// than fail the service when NATS is away.
		nc, err := nats.Connect(cfg.NATSURL, nats.Name("batch-poller"), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
		if err != nil {
			return fmt.Errorf("connect to NATS %s: %w", cfg.NATSURL, err)
		}
		defer nc.Close()
		publish = func(ev *eventsv1.RunEvent) error { return events.PublishBatchNotice(nc, ev) }
	}

	m := metrics.New()
	hc := vendor.NewHTTPClient(cfg.PollConcurrency, 2*time.Minute)
	t := tracker.New([]vendor.Adapter{
		vendor.NewAnthropic(cfg.AnthropicBaseURL, hc),
		vendor.NewOpenAI(cfg.OpenAIBaseURL, hc),
		vendor.NewGemini(cfg.GeminiBaseURL, hc),
	}, src, tracker.Options{
		Period: cfg.PollPeriod, Concurrency: cfg.PollConcurrency, Publish: publish,
		DefaultKeyName: keys.DefaultKeyName, Metrics: m, Log: log,
	})
	g := server.NewGRPC(server.NewService(t))

	httpSrv := &http.Server{Addr: cfg.MetricsAddr, Handler: server.HTTPHandler(m, src.Synced), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := httpSrv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics and health server failed", "addr", cfg.MetricsAddr, "error", err)
		}
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = httpSrv.Shutdown(sctx)
	}()

	go func() {
		if src.WaitForSync(ctx, 5*time.Minute) {
			g.SetServing(true)
			log.Info("agent-secrets cache synced; serving")
		}
	}()
	go t.Run(ctx)

	ln, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.GRPCAddr, err)
	}
	log.Info("batch-poller starting", "grpc", ln.Addr().String(), "metrics", cfg.MetricsAddr,
		"pollPeriod", cfg.PollPeriod.String(), "nats", cfg.NATSURL != "")
	return g.Serve(ctx, ln, cfg.ShutdownTimeout)
}
