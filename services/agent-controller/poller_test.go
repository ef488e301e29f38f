package main

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	batchpb "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

// fakePoller is batch-poller with a vendor that finishes every batch at
// once: what the controller does with the Kubernetes API for a batch run
// does not depend on what stands behind batch-poller.
type fakePoller struct {
	batchpb.UnimplementedBatchServiceServer
}

func (fakePoller) Submit(_ context.Context, req *batchpb.SubmitRequest) (*batchpb.SubmitResponse, error) {
	return &batchpb.SubmitResponse{BatchId: "batch-" + req.GetRun().GetUid(), Provider: batchpb.Provider_PROVIDER_ANTHROPIC}, nil
}

func (fakePoller) Get(context.Context, *batchpb.GetRequest) (*batchpb.GetResponse, error) {
	return &batchpb.GetResponse{State: batchpb.State_STATE_SUCCEEDED,
		Lines: []string{`{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"done","session_id":"s-1"}`}}, nil
}

func (fakePoller) Cancel(context.Context, *batchpb.CancelRequest) (*batchpb.CancelResponse, error) {
	return &batchpb.CancelResponse{State: batchpb.State_STATE_FAILED}, nil
}

// stuckAgent names the batch run whose batch the vendor never lets go of:
// every cleanup attempt fails, until the controller gives up.
const stuckAgent = "stuck-batch"

func (fakePoller) Delete(_ context.Context, req *batchpb.DeleteRequest) (*batchpb.DeleteResponse, error) {
	if req.GetBatch().GetRun().GetAgent() == stuckAgent {
		return nil, status.Error(codes.Unavailable, "the vendor is unavailable")
	}
	return &batchpb.DeleteResponse{}, nil
}

func startPoller(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	batchpb.RegisterBatchServiceServer(s, fakePoller{})
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}
