// Package app assembles the realtime-gateway from its parts and runs it:
// the gRPC server (PromptService, health, reflection), the HTTP server
// (/metrics, /healthz, /readyz) and the graceful shutdown.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/auth"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/config"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/gateway"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/key"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/metrics"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/route"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/session"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/upstream"
)

// drainWait is how long streams ended by Drain get to deliver their
// status before the server is stopped hard.
const drainWait = 5 * time.Second

// App is a realtime-gateway.
type App struct {
	cfg     *config.Config
	log     *slog.Logger
	Metrics *metrics.Metrics
	gw      *gateway.Server
	pool    *upstream.Pool
	cache   crcache.Cache
	key     *key.Source
	health  *health.Server
	grpc    *grpc.Server
}

// New builds a gateway talking to the cluster through rc. ctx bounds its
// watches (Agents, realtime pods, the key Secret); keys, when not nil,
// replaces the key Secret (benchmarks).
func New(ctx context.Context, cfg *config.Config, rc *rest.Config, log *slog.Logger, keys *key.Source) (*App, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	live, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	cache, err := crcache.New(rc, crcache.Options{
		Scheme: scheme,
		// Only realtime run pods: the gateway never needs the others
		// from the cache, and a live read answers the rare question.
		ByObject: map[client.Object]crcache.ByObject{&corev1.Pod{}: {
			Label: labels.SelectorFromSet(labels.Set{agentsv1alpha1.LabelExecution: string(agentsv1alpha1.ExecutionRealtime)}),
		}},
		DefaultTransform: crcache.TransformStripManagedFields(),
		// Reads hand out the cached objects themselves, saving a deep copy
		// per prompt; nothing in the gateway modifies what it reads (the
		// session patcher and the gateway copy before they change one).
		DefaultUnsafeDisableDeepCopy: ptr.To(true),
	})
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	for _, obj := range []client.Object{&agentsv1alpha1.Agent{}, &corev1.Pod{}} {
		if _, err := cache.GetInformer(ctx, obj); err != nil {
			return nil, fmt.Errorf("informer: %w", err)
		}
	}
	go func() {
		if err := cache.Start(ctx); err != nil {
			log.Error("informer cache stopped", "error", err)
		}
	}()
	if keys == nil {
		keys = key.Watch(ctx, kube, cfg.KeySecretNamespace, log)
	}
	m := metrics.New()
	pool := upstream.New(upstream.Options{
		DialTimeout: cfg.DialTimeout, IdleTimeout: cfg.IdleConnTimeout,
		ObserveDial: func(d time.Duration) { m.UpstreamDial.Observe(d.Seconds()) },
	})
	gw := gateway.New(gateway.Deps{
		Authn: auth.NewAuthenticator(kube, cfg.AuthCacheTTL), Authz: auth.NewAuthorizer(kube, cfg.AuthCacheTTL, cfg.DeniedCacheTTL),
		Router: route.New(cache, live), Pods: pool, Key: keys.Key, Session: session.NewPatcher(live), Metrics: m, Log: log,
	})
	var opts []grpc.ServerOption
	if cfg.TLSCert != "" {
		creds, err := credentials.NewServerTLSFromFile(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		opts = append(opts, grpc.Creds(creds))
	}
	srv := grpc.NewServer(opts...)
	realtimev1.RegisterPromptServiceServer(srv, gw)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	return &App{cfg: cfg, log: log, Metrics: m, gw: gw, pool: pool, cache: cache, key: keys, health: hs, grpc: srv}, nil
}

// Ready reports whether the caches are filled and the key is loaded.
func (a *App) Ready(ctx context.Context) bool {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	return a.key.Ready() && a.cache.WaitForCacheSync(sctx)
}

// Serve serves gRPC on grpcLis and HTTP on httpLis until ctx ends, then
// shuts down: no new calls, in-flight ones get the shutdown grace, streams
// still open after it end with Unavailable "gateway shutting down".
func (a *App) Serve(ctx context.Context, grpcLis, httpLis net.Listener) error {
	hsrv := &http.Server{Handler: a.handler(ctx), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hsrv.Serve(httpLis) }()
	served := make(chan error, 1)
	go func() { served <- a.grpc.Serve(grpcLis) }()
	a.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	a.health.SetServingStatus(realtimev1.PromptService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	a.log.Info("realtime-gateway serving", "grpc", grpcLis.Addr().String(), "http", httpLis.Addr().String(), "tls", a.cfg.TLSCert != "")

	var err error
	select {
	case err = <-served:
		err = fmt.Errorf("gRPC server: %w", err)
	case <-ctx.Done():
	}
	a.shutdown()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hsrv.Shutdown(sctx)
	a.pool.Close()
	return err
}

func (a *App) shutdown() {
	a.log.Info("shutting down", "grace", a.cfg.ShutdownGrace.String())
	a.health.Shutdown()
	stopped := make(chan struct{})
	go func() { a.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
		return
	case <-time.After(a.cfg.ShutdownGrace):
	}
	a.log.Warn("shutdown grace over; ending open streams")
	a.gw.Drain()
	select {
	case <-stopped:
	case <-time.After(drainWait):
		a.grpc.Stop()
		<-stopped
	}
}
