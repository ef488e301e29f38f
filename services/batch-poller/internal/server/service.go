// Package server is batch-poller's gRPC face: the BatchService on top of
// the tracker, request validation, error codes, health and reflection.
package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/libs/vendors"
	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"

	"github.com/agentplane/agentplane/services/batch-poller/internal/tracker"
	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

// Service implements batchv1.BatchServiceServer.
type Service struct {
	batchv1.UnimplementedBatchServiceServer
	t *tracker.Tracker
}

// NewService serves t.
func NewService(t *tracker.Tracker) *Service { return &Service{t: t} }

func invalid(field, why string) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, why)
}

func runOf(field string, r *batchv1.Run) (tracker.Run, error) {
	switch {
	case r == nil:
		return tracker.Run{}, invalid(field, "required")
	case r.GetNamespace() == "":
		return tracker.Run{}, invalid(field+".namespace", "required")
	case r.GetAgent() == "":
		return tracker.Run{}, invalid(field+".agent", "required")
	case r.GetUid() == "":
		return tracker.Run{}, invalid(field+".uid", "required")
	}
	return tracker.Run{Namespace: r.GetNamespace(), Agent: r.GetAgent(), UID: r.GetUid(), APIKeyKey: r.GetApiKeyKey()}, nil
}

// checkModel refuses models whose vendor has no batch API.
func checkModel(field, model string) error {
	if model == "" {
		return nil
	}
	cli := vendors.Route(model).Name()
	if _, ok := vendor.ProviderFor(cli); !ok {
		return invalid(field, "model "+model+" runs on "+cli+", which has no batch API")
	}
	return nil
}

func refOf(b *batchv1.BatchRef) (tracker.Ref, error) {
	if b == nil {
		return tracker.Ref{}, invalid("batch", "required")
	}
	run, err := runOf("batch.run", b.GetRun())
	if err != nil {
		return tracker.Ref{}, err
	}
	if _, ok := batchv1.Provider_name[int32(b.GetProvider())]; !ok || b.GetProvider() == batchv1.Provider_PROVIDER_UNSPECIFIED {
		return tracker.Ref{}, invalid("batch.provider", "required (anthropic, openai or gemini)")
	}
	if b.GetBatchId() == "" {
		return tracker.Ref{}, invalid("batch.batch_id", "required")
	}
	if err := checkModel("batch.model", b.GetModel()); err != nil {
		return tracker.Ref{}, err
	}
	if m := b.GetModel(); m != "" {
		// The model picks the CLI lines; they must be the provider's own.
		if p, _ := vendor.ProviderFor(vendors.Route(m).Name()); p != b.GetProvider() {
			return tracker.Ref{}, invalid("batch.model", "model "+m+" is not served by "+b.GetProvider().String())
		}
	}
	return tracker.Ref{Run: run, Provider: b.GetProvider(), BatchID: b.GetBatchId(), Model: b.GetModel()}, nil
}

// onBatch validates b and runs the tracker operation op on it: a bad
// reference is InvalidArgument, and op's error gets its code from
// grpcError, named name.
func onBatch[T any](ctx context.Context, b *batchv1.BatchRef, name string, op func(context.Context, tracker.Ref) (T, error)) (T, error) {
	var zero T
	ref, err := refOf(b)
	if err != nil {
		return zero, err
	}
	v, err := op(ctx, ref)
	if err != nil {
		return zero, grpcError(name, err)
	}
	return v, nil
}

// Submit implements BatchServiceServer.
func (s *Service) Submit(ctx context.Context, req *batchv1.SubmitRequest) (*batchv1.SubmitResponse, error) {
	run, err := runOf("run", req.GetRun())
	if err != nil {
		return nil, err
	}
	switch {
	case req.GetModel() == "":
		return nil, invalid("model", "required")
	case req.GetPrompt() == "":
		return nil, invalid("prompt", "required")
	case req.GetMaxTokens() <= 0:
		return nil, invalid("max_tokens", "must be positive")
	}
	if err := checkModel("model", req.GetModel()); err != nil {
		return nil, err
	}
	id, p, err := s.t.Submit(ctx, tracker.Submission{
		Run: run, Model: req.GetModel(), Prompt: req.GetPrompt(), MaxTokens: req.GetMaxTokens(), OutputSchema: req.GetOutputSchema(),
	})
	if err != nil {
		return nil, grpcError("submit", err)
	}
	return &batchv1.SubmitResponse{BatchId: id, Provider: p}, nil
}

// Get implements BatchServiceServer.
func (s *Service) Get(ctx context.Context, req *batchv1.GetRequest) (*batchv1.GetResponse, error) {
	snap, err := onBatch(ctx, req.GetBatch(), "get", s.t.Get)
	if err != nil {
		return nil, err
	}
	resp := &batchv1.GetResponse{State: snap.State, Lines: snap.Lines, FailureMessage: snap.FailureMessage, VendorStatus: snap.VendorStatus}
	if !snap.CheckedAt.IsZero() {
		resp.CheckedAt = timestamppb.New(snap.CheckedAt)
	}
	return resp, nil
}

// Cancel implements BatchServiceServer.
func (s *Service) Cancel(ctx context.Context, req *batchv1.CancelRequest) (*batchv1.CancelResponse, error) {
	snap, err := onBatch(ctx, req.GetBatch(), "cancel", s.t.Cancel)
	if err != nil {
		return nil, err
	}
	return &batchv1.CancelResponse{State: snap.State, VendorStatus: snap.VendorStatus}, nil
}

// Delete implements BatchServiceServer.
func (s *Service) Delete(ctx context.Context, req *batchv1.DeleteRequest) (*batchv1.DeleteResponse, error) {
	_, err := onBatch(ctx, req.GetBatch(), "delete", func(ctx context.Context, ref tracker.Ref) (struct{}, error) {
		return struct{}{}, s.t.Delete(ctx, ref)
	})
	if err != nil {
		return nil, err
	}
	return &batchv1.DeleteResponse{}, nil
}
