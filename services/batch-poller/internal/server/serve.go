package server

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/agentplane/agentplane/libs/grpcauth"
	"github.com/agentplane/agentplane/libs/service/grpcserver"
	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

// NewGRPC returns the skeleton's gRPC server (health, reflection,
// interceptors; its metrics on reg) with svc registered behind guard:
// every call but gRPC health and reflection needs a caller guard admits
// (docs/batch-poller.md, "Callers"). BatchService has a health status of
// its own besides the server's, so a client may ask for either; both
// follow the server's.
func NewGRPC(log *slog.Logger, reg prometheus.Registerer, svc batchv1.BatchServiceServer, guard grpcauth.Guard) (*grpcserver.Server, error) {
	if guard.Authn == nil || guard.Authorize == nil {
		return nil, errors.New("batch-poller serves no call without an authenticator and an allow list")
	}
	guard.Open = grpcauth.HealthAndReflection
	g, err := grpcserver.New(log, reg, guard.ServerOptions()...)
	if err != nil {
		return nil, err
	}
	batchv1.RegisterBatchServiceServer(g, svc)
	// Registered now so that Serve's changes of status include it.
	g.Health.SetServingStatus(batchv1.BatchService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return g, nil
}
