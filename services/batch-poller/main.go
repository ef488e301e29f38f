// Command batch-poller is the vendor batch gateway: it serves
// agentplane.batch.v1.BatchService over gRPC, submits batch runs to the
// Anthropic, OpenAI and Gemini batch APIs with each namespace's API key,
// polls them at most once per poll period, and publishes a NATS notice
// when one ends.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	// The image is FROM scratch, without a CA bundle: the vendors' HTTPS
	// APIs are verified against these roots when the system has none.
	_ "golang.org/x/crypto/x509roots/fallback"
	"k8s.io/client-go/kubernetes"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/grpcauth"
	"github.com/agentplane/agentplane/libs/service"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"

	"github.com/agentplane/agentplane/services/batch-poller/internal/config"
	"github.com/agentplane/agentplane/services/batch-poller/internal/keys"
	"github.com/agentplane/agentplane/services/batch-poller/internal/metrics"
	"github.com/agentplane/agentplane/services/batch-poller/internal/server"
	"github.com/agentplane/agentplane/services/batch-poller/internal/state"
	"github.com/agentplane/agentplane/services/batch-poller/internal/tracker"
	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

func main() { service.Main(config.Name, config.Parse, run) }

// authCacheTTL is how long an accepted caller token is remembered: a
// controller polling many runs costs one TokenReview per half minute, and
// a revoked token is refused within that time.
const authCacheTTL = 30 * time.Second

// syncWait bounds the wait for the first list of agent-secrets Secrets;
// past it the process keeps serving and stays unready, and the kubelet's
// probes tell the operator.
const syncWait = 5 * time.Minute

// connectNATS connects for completion notices with batch-poller's
// credential and CA (cfg.NATS). Notices are fire and forget: it keeps
// reconnecting forever rather than fail the service when NATS is away,
// also past an authorization error, since the creds file is read again on
// every attempt and a rotated Secret ends it. The first error of each
// outage is logged, so a refused credential is seen without a line every
// reconnect wait.
func connectNATS(cfg *config.Config, log *slog.Logger) (*nats.Conn, error) {
	nl := &natsLog{log: log}
	opts := append([]nats.Option{nats.Name(config.Name), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		nats.IgnoreAuthErrorAbort(),
		nats.ErrorHandler(func(nc *nats.Conn, _ *nats.Subscription, err error) {
			// An authorization error arrives here while reconnecting; an
			// error on a live connection is worth a line of its own.
			if nc.IsConnected() {
				log.Warn("NATS error", "err", err)
				return
			}
			nl.failed(err)
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { nl.failed(err) }),
		nats.ConnectHandler(func(*nats.Conn) { nl.connected() }),
		nats.ReconnectHandler(func(*nats.Conn) { nl.connected() }),
	}, cfg.NATS.Options()...)
	nc, err := nats.Connect(cfg.NATSURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS %s: %w", cfg.NATSURL, err)
	}
	return nc, nil
}

// natsLog logs the first NATS error after each successful connection and
// drops the repeats. The errors are the server's and the client's
// (authorization violation, connection refused); they never hold the
// credential.
type natsLog struct {
	log     *slog.Logger
	mu      sync.Mutex
	failing bool
}

func (l *natsLog) failed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failing {
		return
	}
	l.failing = true
	l.log.Warn("NATS unavailable; completion notices wait until it is back", "err", err)
}

func (l *natsLog) connected() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failing = false
	l.log.Info("connected to NATS")
}

func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	rc, err := service.RESTConfig(config.Name, cfg.Kube)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("clientset: %w", err)
	}
	src := keys.New(kube, cfg.SecretNamespaces...)
	src.Start(ctx)

	var publish func(*eventsv1.RunEvent) error
	var store state.Store
	if cfg.NATSURL != "" {
		nc, err := connectNATS(cfg, log)
		if err != nil {
			return err
		}
		defer nc.Close()
		publish = func(ev *eventsv1.RunEvent) error { return events.PublishBatchNotice(nc, ev) }
		js, err := jetstream.New(nc)
		if err != nil {
			return fmt.Errorf("jetstream: %w", err)
		}
		store = state.NewKV(js, state.KVConfig{Bucket: cfg.State.Bucket, Replicas: cfg.State.Replicas, TTL: cfg.State.TTL})
	} else {
		log.Warn("no --nats-url: each run's batch is kept in this process only; run one replica, and a restart forgets which runs were submitted")
	}

	m := metrics.New()
	if err := service.RegisterBuildInfo(m.Registry, config.Name); err != nil {
		return err
	}
	hc := vendor.NewHTTPClient(cfg.PollConcurrency, 2*time.Minute)
	t := tracker.New([]vendor.Adapter{
		vendor.NewAnthropic(cfg.AnthropicBaseURL, hc),
		vendor.NewOpenAI(cfg.OpenAIBaseURL, hc),
		vendor.NewGemini(cfg.GeminiBaseURL, hc),
	}, src, tracker.Options{
		Period: cfg.PollPeriod, Concurrency: cfg.PollConcurrency, Publish: publish,
		DefaultKeyName: keys.DefaultKeyName, Metrics: m, Log: log,
		Store: store, Identity: cfg.Pod.Name, MaxBackoff: cfg.PollBackoffMax,
	})
	guard := grpcauth.Guard{
		Authn:     grpcauth.NewAuthenticator(kube, grpcauth.Options{TTL: authCacheTTL, Audiences: []string{cfg.TokenAudience}}),
		Authorize: grpcauth.AllowUsers(cfg.AllowedCallers...),
	}
	g, err := server.NewGRPC(log, m.Registry, server.NewService(t), guard)
	if err != nil {
		return err
	}
	// gRPC health says NOT_SERVING until the key cache has synced, as
	// /readyz does; calls made before then are answered Unavailable.
	synced := make(chan struct{})
	g.NotServingUntil(synced)
	if err := g.Listen(cfg.GRPCBindAddress); err != nil {
		return err
	}

	hs := service.NewHTTPServer(log, m.Registry)
	server.AddProbes(hs, src.Synced)
	if err := hs.Start(cfg.Options); err != nil {
		return err
	}
	defer hs.ShutdownWithin(5 * time.Second)

	go func() {
		switch {
		case src.WaitForSync(ctx, syncWait):
			close(synced)
			log.Info("agent-secrets cache synced; serving")
		case ctx.Err() == nil:
			log.Error("agent-secrets cache not synced; staying unready", "waited", syncWait.String())
		}
	}()
	go t.Run(ctx)

	log.Info("batch-poller starting", "version", service.Version().Version, "grpc", g.Addr().String(),
		"metrics", cfg.MetricsBindAddress, "health", cfg.HealthProbeBindAddress,
		"pollPeriod", cfg.PollPeriod.String(), "nats", cfg.NATSURL != "", "natsCredential", cfg.NATS.CredsFile != "",
		"allowedCallers", cfg.AllowedCallers, "identity", cfg.Pod.Name, "stateBucket", stateName(cfg), "tokenAudience", cfg.TokenAudience, "secretNamespaces", cfg.SecretNamespaces)
	return g.Serve(ctx, cfg.ShutdownTimeout)
}

// stateName says where the durable table is, for the start-up line.
func stateName(cfg *config.Config) string {
	if cfg.NATSURL == "" {
		return "(in memory)"
	}
	return cfg.State.Bucket
}
