// Package grpcserver is the gRPC half of the process skeleton (see package
// service): a grpc.Server with panic recovery, logging and Prometheus
// interceptors, the gRPC health service and server reflection. It lives
// apart from service so that binaries serving no gRPC do not link grpc.
package grpcserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// Server is a grpc.Server with the skeleton's interceptors (panic
// recovery, logging, Prometheus metrics), the gRPC health service and
// server reflection.
type Server struct {
	*grpc.Server
	// Health is the gRPC health service; Serve marks it SERVING and,
	// on shutdown, NOT_SERVING before it drains.
	Health  *health.Server
	log     *slog.Logger
	metrics *grpcprom.ServerMetrics
	lis     net.Listener
	ready   <-chan struct{}
}

// New builds the server; register services on it, then Serve.
// Its metrics (grpc_server_handled_total, grpc_server_handling_seconds, ...)
// go to reg. opts add to the skeleton's options (credentials, say).
func New(log *slog.Logger, reg prometheus.Registerer, opts ...grpc.ServerOption) (*Server, error) {
	m := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	if err := reg.Register(m); err != nil {
		return nil, fmt.Errorf("register gRPC metrics: %w", err)
	}
	lg := logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		log.Log(ctx, slog.Level(lvl), msg, fields...)
	})
	logOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		// A successful call is routine; only its failures are news.
		logging.WithLevels(func(c codes.Code) logging.Level {
			if c == codes.OK {
				return logging.LevelDebug
			}
			return logging.DefaultServerCodeToLevel(c)
		}),
	}
	recover := recovery.WithRecoveryHandler(func(p any) error {
		log.Error("gRPC handler panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})
	all := append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(m.UnaryServerInterceptor(), logging.UnaryServerInterceptor(lg, logOpts...), recovery.UnaryServerInterceptor(recover)),
		grpc.ChainStreamInterceptor(m.StreamServerInterceptor(), logging.StreamServerInterceptor(lg, logOpts...), recovery.StreamServerInterceptor(recover)),
	}, opts...)
	s := &Server{Server: grpc.NewServer(all...), Health: health.NewServer(), log: log, metrics: m}
	healthpb.RegisterHealthServer(s.Server, s.Health)
	reflection.Register(s.Server)
	return s, nil
}

// Listen opens addr; a port already taken fails at start.
func (s *Server) Listen(addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("gRPC listen on %s: %w", addr, err)
	}
	s.lis = lis
	return nil
}

// Addr is the listening address after Listen.
func (s *Server) Addr() net.Addr {
	if s.lis == nil {
		return nil
	}
	return s.lis.Addr()
}

// NotServingUntil makes Serve hold the health service at NOT_SERVING
// until ready is closed. Calls are answered meanwhile; only the health
// answer waits, for a server that must fill a cache before its answers
// are worth routing to. Call it before Serve.
func (s *Server) NotServingUntil(ready <-chan struct{}) { s.ready = ready }

// Serve serves on the listener opened by Listen until ctx ends, then
// marks itself NOT_SERVING, lets in-flight calls finish for up to
// shutdownTimeout, and stops. It returns nil after a shutdown that ctx
// started.
func (s *Server) Serve(ctx context.Context, shutdownTimeout time.Duration) error {
	if s.lis == nil {
		return fmt.Errorf("gRPC Serve before Listen")
	}
	s.metrics.InitializeMetrics(s.Server)
	// gated closes once the health service may no longer change to
	// SERVING, so shutdown cannot be overtaken by a late Resume.
	gated := make(chan struct{})
	if s.ready == nil {
		s.Health.Resume()
		close(gated)
	} else {
		s.Health.Shutdown()
		go func() {
			defer close(gated)
			select {
			case <-s.ready:
				s.Health.Resume()
			case <-ctx.Done():
			}
		}()
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Server.Serve(s.lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	<-gated
	s.Health.Shutdown()
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(shutdownTimeout):
		s.log.Warn("gRPC calls still running at the shutdown timeout; stopping them", "timeout", shutdownTimeout)
		s.Stop()
		<-done
	}
	return nil
}
