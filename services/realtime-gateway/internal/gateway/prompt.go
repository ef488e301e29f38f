package gateway

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/auth"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/validate"
)

// Prompt forwards one prompt to the Agent's session and streams the turn
// back until its TurnEnd.
func (s *Server) Prompt(req *realtimev1.PromptRequest, stream grpc.ServerStreamingServer[realtimev1.PromptResponse]) (err error) {
	began := time.Now()
	s.d.Metrics.SessionsActive.Inc()
	defer func() {
		s.d.Metrics.SessionsActive.Dec()
		s.d.Metrics.PromptsTotal.WithLabelValues(status.Code(err).String()).Inc()
		s.logCall(stream.Context(), "prompt", req.GetAgent(), began, err)
	}()
	ctx := stream.Context()
	c, err := s.admit(ctx, req.GetAgent(), auth.VerbCreate, validate.Text(req.GetText()))
	if err != nil {
		return err
	}
	defer c.done()

	// The upstream call ends with the caller's call or at Drain, whichever
	// comes first. A turn the caller leaves keeps running in the pod.
	// (AfterFunc costs no goroutine per idle stream until it fires.)
	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.draining, cancel)()
	up, err := c.client.Prompt(uctx, &supervisorv1.PromptRequest{Token: c.token, Text: req.GetText()})
	if err != nil {
		return s.upstreamErr(ctx, c, err)
	}
	first := true
	for {
		m, err := up.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return status.Errorf(codes.Unavailable, "Agent %s/%s: the run pod ended the turn's stream without a turn end", c.target.Agent.Namespace, c.target.Agent.Name)
			}
			return s.upstreamErr(ctx, c, err)
		}
		if first {
			first = false
			s.d.Metrics.PromptLatency.WithLabelValues("first_event").Observe(time.Since(began).Seconds())
		}
		if ev := m.GetEvent(); ev != nil {
			if err := stream.Send(&realtimev1.PromptResponse{Item: &realtimev1.PromptResponse_Event{Event: ev}}); err != nil {
				return err
			}
			s.record(ctx, c, ev.GetSessionId())
			continue
		}
		if te := m.GetTurnEnd(); te != nil {
			// Recorded before the caller hears the turn ended, so whoever
			// reads the Agent next sees the id the turn reported.
			s.record(ctx, c, te.GetSessionId())
			s.d.Metrics.PromptLatency.WithLabelValues("turn").Observe(time.Since(began).Seconds())
			return stream.Send(&realtimev1.PromptResponse{Item: &realtimev1.PromptResponse_TurnEnd{TurnEnd: turnEnd(te)}})
		}
	}
}

// upstreamErr turns what the session server answered into the caller's
// status: Drain wins, then the caller's own cancellation, then the pod's
// answer mapped by mapUpstream.
func (s *Server) upstreamErr(ctx context.Context, c *call, err error) error {
	if s.draining.Err() != nil {
		return errShuttingDown
	}
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return mapUpstream(c, err)
}
