package server

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

// GRPC is the gRPC server with BatchService, health and reflection.
type GRPC struct {
	srv    *grpc.Server
	health *health.Server
}

// NewGRPC registers svc. Health starts NOT_SERVING; SetServing flips it
// once the key cache is ready.
func NewGRPC(svc batchv1.BatchServiceServer) *GRPC {
	g := &GRPC{srv: grpc.NewServer(), health: health.NewServer()}
	batchv1.RegisterBatchServiceServer(g.srv, svc)
	healthpb.RegisterHealthServer(g.srv, g.health)
	reflection.Register(g.srv)
	g.SetServing(false)
	return g
}

// SetServing sets the health of the whole server and of BatchService.
func (g *GRPC) SetServing(ok bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		st = healthpb.HealthCheckResponse_SERVING
	}
	g.health.SetServingStatus("", st)
	g.health.SetServingStatus(batchv1.BatchService_ServiceDesc.ServiceName, st)
}

// Serve serves on ln until ctx ends, then stops gracefully: in-flight
// calls get up to timeout to finish before the server stops hard.
func (g *GRPC) Serve(ctx context.Context, ln net.Listener, timeout time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- g.srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	g.health.Shutdown()
	done := make(chan struct{})
	go func() {
		g.srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		g.srv.Stop()
		<-done
	}
	return nil
}
