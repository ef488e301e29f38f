package run

import (
	"context"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentplane/agentplane/libs/realtime"
	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
)

// sessionService serves supervisor.v1.SessionService for one session.
// Every RPC checks the token before it looks at anything else, so a
// caller without it learns nothing and starts nothing.
type sessionService struct {
	supervisorv1.UnimplementedSessionServiceServer
	token string
	s     *session
	// closed is signalled (never blocking) once a Close ended the session.
	closed chan<- struct{}
}

// presentedToken is the request's token field, else the metadata entry.
func presentedToken(ctx context.Context, field string) string {
	if field != "" {
		return field
	}
	if v := metadata.ValueFromIncomingContext(ctx, realtime.MetadataKey); len(v) > 0 {
		return v[0]
	}
	return ""
}

// authorize refuses a missing or wrong token with Unauthenticated. The
// message never echoes either token.
func authorize(want, got string) error {
	if got == "" {
		return status.Error(codes.Unauthenticated, "missing run token")
	}
	if !realtime.Equal(want, got) {
		return status.Error(codes.Unauthenticated, "invalid run token")
	}
	return nil
}

// validateText refuses a prompt the CLI could not be given: empty, too
// long for one argv entry, with a NUL (argv cannot carry one) or not UTF-8.
func validateText(text string) error {
	switch {
	case strings.TrimSpace(text) == "":
		return status.Error(codes.InvalidArgument, "prompt text is empty")
	case len(text) > realtime.MaxPromptBytes:
		return status.Errorf(codes.InvalidArgument, "prompt text is %d bytes; at most %d are allowed", len(text), realtime.MaxPromptBytes)
	case strings.IndexByte(text, 0) >= 0:
		return status.Error(codes.InvalidArgument, "prompt text contains a NUL byte")
	case !utf8.ValidString(text):
		return status.Error(codes.InvalidArgument, "prompt text is not valid UTF-8")
	}
	return nil
}

// checkPrompt is the whole admission of a prompt before the session is
// asked: authentication first, then the text.
func checkPrompt(want, got, text string) error {
	if err := authorize(want, got); err != nil {
		return err
	}
	return validateText(text)
}

// Prompt runs one turn and streams its events, then its TurnEnd.
func (g *sessionService) Prompt(req *supervisorv1.PromptRequest, stream grpc.ServerStreamingServer[supervisorv1.PromptResponse]) error {
	ctx := stream.Context()
	if err := checkPrompt(g.token, presentedToken(ctx, req.GetToken()), req.GetText()); err != nil {
		return err
	}
	q := newEventQueue()
	t, err := g.s.begin(req.GetText(), q)
	if err != nil {
		return err
	}
	send := func() error {
		for _, ev := range q.take() {
			if err := stream.Send(&supervisorv1.PromptResponse{Item: &supervisorv1.PromptResponse_Event{Event: ev}}); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		select {
		case <-q.ready:
			if err := send(); err != nil {
				return err
			}
		case <-t.done:
			// The reader has finished before done closes: nothing more
			// can be queued.
			if err := send(); err != nil {
				return err
			}
			return stream.Send(&supervisorv1.PromptResponse{Item: &supervisorv1.PromptResponse_TurnEnd{TurnEnd: &supervisorv1.TurnEnd{
				SessionId: t.sessionID, IsError: t.out.isError, Reason: t.out.reason, ExitCode: t.out.exitCode}}})
		case <-ctx.Done():
			// The turn goes on; its events still reach the log and NATS.
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// Close ends the session and lets the supervisor exit.
func (g *sessionService) Close(ctx context.Context, req *supervisorv1.CloseRequest) (*supervisorv1.CloseResponse, error) {
	if err := authorize(g.token, presentedToken(ctx, req.GetToken())); err != nil {
		return nil, err
	}
	id, turns := g.s.end()
	select {
	case g.closed <- struct{}{}:
	default:
	}
	return &supervisorv1.CloseResponse{SessionId: id, Turns: turns}, nil
}

// Info reports the session's state.
func (g *sessionService) Info(ctx context.Context, req *supervisorv1.InfoRequest) (*supervisorv1.InfoResponse, error) {
	if err := authorize(g.token, presentedToken(ctx, req.GetToken())); err != nil {
		return nil, err
	}
	in := g.s.info()
	resp := &supervisorv1.InfoResponse{SessionId: in.id, State: in.state, Turns: in.turns,
		StartedAt: timestamppb.New(in.startedAt)}
	if !in.lastPrompt.IsZero() {
		resp.LastPromptAt = timestamppb.New(in.lastPrompt)
	}
	return resp, nil
}
