// Command agent-controller drives every Agent (agents.re-cinq.com) from
// creation to a terminal phase through a Kubernetes Job, with a watch + poll
// + cache loop, Station concurrency, history pruning, Prometheus metrics and
// leader election on the agent-controller Lease.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	batchpb "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/config"
	"github.com/agentplane/agentplane/services/agent-controller/internal/controller"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
	"github.com/agentplane/agentplane/services/agent-controller/internal/leader"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
	"github.com/agentplane/agentplane/services/agent-controller/internal/reconcile"
)

func main() {
	cfg, err := config.Parse(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-controller: %v\n", err)
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
		log.Error("agent-controller stopped", "error", err)
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
	rc.QPS, rc.Burst = float32(cfg.QPS), cfg.Burst
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := agentsv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.NewWithWatch(rc, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("clientset: %w", err)
	}
	m := metrics.New()
	opts := controller.Options{
		Namespace: cfg.Namespace, Workers: cfg.Workers, PollInterval: cfg.PollInterval, PageSize: cfg.PageSize, Log: log,
		BatchCleanupBackoff: cfg.BatchCleanupBackoff, RealtimeKeyNamespace: cfg.RealtimeKeyNamespace,
		Reconcile: reconcile.Config{
			MaxOutputBytes: cfg.MaxOutputBytes, RealtimeEnabled: cfg.RealtimeEnabled,
			BatchEnabled: cfg.BatchEnabled, BatchPoll: cfg.BatchPoll, BatchTimeoutUnit: cfg.BatchTimeoutUnit,
			Job: jobbuild.Config{SupervisorImage: cfg.SupervisorImage, SupervisorPath: cfg.SupervisorPath, NATSURL: cfg.NATSURL},
		},
	}
	if cfg.BatchEnabled {
		conn, err := grpc.NewClient(cfg.BatchPollerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("batch-poller client for %s: %w", cfg.BatchPollerAddr, err)
		}
		defer func() { _ = conn.Close() }()
		opts.Batch = batchpb.NewBatchServiceClient(conn)
	}
	if cfg.BatchEnabled && cfg.NATSURL != "" {
		// Batch runs have no supervisor: the controller publishes their
		// events and hears batch-poller's completion notices.
		pub, err := events.NewPublisher(events.PublisherOptions{URL: cfg.NATSURL, Name: "agent-controller " + cfg.Identity, Logger: log})
		if err != nil {
			log.Warn("no NATS for batch runs: no stream events, no completion notices", "error", err)
		} else {
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = pub.Close(sctx)
			}()
			opts.Events = pub
		}
	}
	state := &leader.State{}
	srv := &http.Server{Addr: cfg.Addr, Handler: handler(m, state), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health and metrics server failed", "addr", cfg.Addr, "error", err)
		}
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("agent-controller starting", "identity", cfg.Identity, "namespace", cfg.Namespace, "leaderElect", cfg.LeaderElect, "addr", cfg.Addr)

	lead := func(ctx context.Context) {
		ctl := controller.New(c, kube, m, opts)
		state.SetController(ctl)
		defer state.SetController(nil)
		if err := ctl.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("controller loop ended", "error", err)
		}
	}
	if !cfg.LeaderElect {
		state.SetLeader(true)
		lead(ctx)
		return nil
	}
	return leader.Run(ctx, leader.Config{
		Client: kube, Namespace: cfg.LeaseNamespace, Name: "agent-controller", Identity: cfg.Identity,
		LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
		Log: log, OnLeading: lead, State: state, Metrics: m,
	})
}

// handler serves /metrics, /healthz (the process is alive) and /readyz (a
// standby is ready; a leader once its cache has synced and while its poll
// works).
func handler(m *metrics.Metrics, state *leader.State) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := state.Ready(); !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
