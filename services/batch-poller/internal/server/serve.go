package server

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/agentplane/agentplane/libs/service"
	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

// NewGRPC returns the skeleton's gRPC server (health, reflection,
// interceptors; its metrics on reg) with svc registered. BatchService has
// a health status of its own besides the server's, so a client may ask
// for either; both follow the server's.
func NewGRPC(log *slog.Logger, reg prometheus.Registerer, svc batchv1.BatchServiceServer) (*service.GRPCServer, error) {
	g, err := service.NewGRPCServer(log, reg)
	if err != nil {
		return nil, err
	}
	batchv1.RegisterBatchServiceServer(g, svc)
	// Registered now so that Serve's changes of status include it.
	g.Health.SetServingStatus(batchv1.BatchService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return g, nil
}
