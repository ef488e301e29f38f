package gateway

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/auth"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/validate"
)

// Close ends the Agent's session and records its last session id.
func (s *Server) Close(ctx context.Context, req *realtimev1.CloseRequest) (resp *realtimev1.CloseResponse, err error) {
	began := time.Now()
	defer func() { s.logCall(ctx, "close", req.GetAgent(), began, err) }()
	c, err := s.admit(ctx, req.GetAgent(), auth.VerbCreate, nil)
	if err != nil {
		return nil, err
	}
	defer c.done()
	out, err := c.client.Close(ctx, &supervisorv1.CloseRequest{Token: c.token})
	if err != nil {
		return nil, mapUpstream(c, err)
	}
	s.record(ctx, c, out.GetSessionId())
	return &realtimev1.CloseResponse{SessionId: out.GetSessionId(), Turns: out.GetTurns()}, nil
}

// GetSession reports the session's state. A finished Agent is not an
// error here: its session is CLOSED with the id its status holds.
func (s *Server) GetSession(ctx context.Context, req *realtimev1.GetSessionRequest) (resp *realtimev1.GetSessionResponse, err error) {
	began := time.Now()
	defer func() { s.logCall(ctx, "get-session", req.GetAgent(), began, err) }()
	u, err := s.d.Authn.Authenticate(ctx)
	if err != nil {
		return nil, err
	}
	ref := req.GetAgent()
	if err := validate.Agent(ref); err != nil {
		return nil, err
	}
	if err := s.d.Authz.Authorize(ctx, u, auth.VerbGet, ref.GetNamespace(), ref.GetName()); err != nil {
		return nil, err
	}
	t, a, err := s.d.Router.Resolve(ctx, ref.GetNamespace(), ref.GetName())
	var c *call
	if err == nil {
		c, a, err = s.reach(ctx, u, t)
	}
	if err != nil {
		if a != nil && a.IsTerminal() {
			return &realtimev1.GetSessionResponse{SessionId: a.Status.SessionID, State: realtimev1.SessionState_SESSION_STATE_CLOSED}, nil
		}
		return nil, err
	}
	defer c.done()
	in, err := c.client.Info(ctx, &supervisorv1.InfoRequest{Token: c.token})
	if err != nil {
		return nil, mapUpstream(c, err)
	}
	return info(in), nil
}

// logCall logs one finished call: who asked is known to the access
// review; here the Agent, the outcome and the time, never a token.
func (s *Server) logCall(ctx context.Context, method string, ref *realtimev1.AgentRef, began time.Time, err error) {
	lvl := slog.LevelInfo
	if c := status.Code(err); c == codes.Internal || c == codes.Unknown {
		lvl = slog.LevelError
	}
	s.d.Log.Log(ctx, lvl, "call", "method", method,
		"agent", ref.GetNamespace()+"/"+ref.GetName(), "code", status.Code(err).String(), "ms", time.Since(began).Milliseconds())
}
