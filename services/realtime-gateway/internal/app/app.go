// Package app assembles the realtime-gateway from its parts and runs it on
// the libs/service skeleton: the gRPC server (PromptService, health,
// reflection, interceptors), the HTTP server (/metrics, /healthz, /readyz)
// and the graceful shutdown.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	batchv1 "k8s.io/api/batch/v1"
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
	"github.com/agentplane/agentplane/libs/service"
	"github.com/agentplane/agentplane/libs/service/grpcserver"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/auth"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/config"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/gateway"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/key"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/metrics"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/route"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/servingcert"
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
	grpc    *grpcserver.Server
	http    *service.HTTPServer
	// stopping turns /readyz off once shutdown began.
	stopping atomic.Bool
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
		// Only realtime run pods, and only run Jobs (read to check that
		// the Agent controls its Job, route): the gateway never needs the
		// others from the cache, and a live read answers the rare question.
		ByObject: map[client.Object]crcache.ByObject{
			&corev1.Pod{}: {
				Label: labels.SelectorFromSet(labels.Set{agentsv1alpha1.LabelExecution: string(agentsv1alpha1.ExecutionRealtime)}),
			},
			&batchv1.Job{}: {
				Label: labels.SelectorFromSet(labels.Set{agentsv1alpha1.LabelComponent: agentsv1alpha1.ComponentJob}),
			},
		},
		DefaultTransform: crcache.TransformStripManagedFields(),
		// Reads hand out the cached objects themselves, saving a deep copy
		// per prompt; nothing in the gateway modifies what it reads (the
		// session patcher and the gateway copy before they change one).
		DefaultUnsafeDisableDeepCopy: ptr.To(true),
	})
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	for _, obj := range []client.Object{&agentsv1alpha1.Agent{}, &corev1.Pod{}, &batchv1.Job{}} {
		if _, err := cache.GetInformer(ctx, obj); err != nil {
			return nil, fmt.Errorf("informer: %w", err)
		}
	}
	go func() {
		if err := cache.Start(ctx); err != nil {
			log.Error("informer cache stopped", "err", err)
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
		Authn: auth.NewAuthenticator(kube, cfg.AuthCacheTTL, cfg.TokenAudiences), Authz: auth.NewAuthorizer(kube, cfg.AuthCacheTTL, cfg.DeniedCacheTTL),
		Router: route.New(cache, live), Pods: pool, Key: keys.Key, Session: session.NewPatcher(live), Metrics: m, Log: log,
	})
	var opts []grpc.ServerOption
	if cfg.TLSCertFile != "" {
		// Followed until ctx ends, so a renewed certificate is served
		// without a restart (servingcert).
		tc, err := servingcert.Watch(ctx, cfg.TLSCertFile, cfg.TLSPrivateKeyFile, log)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("--tls-cert-file / --tls-private-key-file: %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	if err := service.RegisterBuildInfo(m.Registry, config.Name); err != nil {
		pool.Close()
		return nil, err
	}
	srv, err := grpcserver.New(log, m.Registry, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	realtimev1.RegisterPromptServiceServer(srv, gw)
	// Registered now so that Serve's changes of status include it.
	srv.Health.SetServingStatus(realtimev1.PromptService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	a := &App{cfg: cfg, log: log, Metrics: m, gw: gw, pool: pool, cache: cache, key: keys, grpc: srv,
		http: service.NewHTTPServer(log, m.Registry)}
	a.http.AddReadyCheck("informers-and-key", a.readiness)
	return a, nil
}

// Ready reports whether the caches are filled and the key is loaded.
func (a *App) Ready(ctx context.Context) bool {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	return a.key.Ready() && a.cache.WaitForCacheSync(sctx)
}

// readiness is /readyz: a prompt can be served, and the gateway is not
// shutting down (so the Service stops sending it new callers).
func (a *App) readiness() error {
	switch {
	case a.stopping.Load():
		return errors.New("shutting down")
	case !a.Ready(context.Background()):
		return errors.New("informer caches not synced or realtime key not loaded")
	}
	return nil
}

// Listen opens the gRPC listener and starts the HTTP server, so a port
// already taken fails the process at start. ctx bounds the HTTP server's
// shutdown when the gRPC port is taken.
func (a *App) Listen(ctx context.Context) error {
	if err := a.http.Start(a.cfg.Options); err != nil {
		return err
	}
	if err := a.grpc.Listen(a.cfg.GRPCBindAddress); err != nil {
		a.http.Shutdown(ctx)
		return err
	}
	return nil
}

// GRPCAddr is the gRPC listener's address after Listen.
func (a *App) GRPCAddr() net.Addr { return a.grpc.Addr() }

// Serve serves until ctx ends, then shuts down: no new calls (health turns
// NOT_SERVING), in-flight ones get the shutdown timeout, streams still open
// after it end with Unavailable "gateway shutting down", and whatever has
// not returned drainWait later is stopped hard.
func (a *App) Serve(ctx context.Context) error {
	a.log.Info("realtime-gateway serving", "version", service.Version().Version, "grpc", a.GRPCAddr().String(),
		"metrics", a.cfg.MetricsBindAddress, "health", a.cfg.HealthProbeBindAddress, "tls", a.cfg.TLSCertFile != "",
		"tokenAudiences", strings.Join(a.cfg.TokenAudiences, ","))
	served := make(chan struct{})
	go a.drainAfterTimeout(ctx, served)
	err := a.grpc.Serve(ctx, a.cfg.ShutdownTimeout+drainWait)
	close(served)
	if err != nil {
		err = fmt.Errorf("gRPC server: %w", err)
	}
	a.http.ShutdownWithin(5 * time.Second)
	a.pool.Close()
	return err
}

// drainAfterTimeout ends the streams still open once the shutdown timeout
// has passed, so their callers hear why rather than see the connection
// drop; the gRPC server's graceful stop then completes.
func (a *App) drainAfterTimeout(ctx context.Context, served <-chan struct{}) {
	select {
	case <-ctx.Done():
	case <-served:
		return
	}
	a.stopping.Store(true)
	a.log.Info("shutting down", "timeout", a.cfg.ShutdownTimeout.String())
	select {
	case <-served:
		return
	case <-time.After(a.cfg.ShutdownTimeout):
	}
	a.log.Warn("shutdown timeout over; ending open streams")
	a.gw.Drain()
}
