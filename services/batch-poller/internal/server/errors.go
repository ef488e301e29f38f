package server

import (
	"context"
	"errors"
	"net"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/services/batch-poller/internal/tracker"
	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

// grpcError gives err the code the controller acts on: the caller's
// mistake (InvalidArgument, FailedPrecondition, Unauthenticated,
// PermissionDenied, NotFound) versus worth a retry (Unavailable).
func grpcError(op string, err error) error {
	var ve *vendor.Error
	switch {
	case errors.Is(err, tracker.ErrNotThisRun):
		// As for a batch that does not exist: the caller learns nothing
		// of another run's.
		return status.Errorf(codes.NotFound, "%s: %v", op, err)
	case errors.As(err, &ve):
		return status.Errorf(codeForHTTP(ve.HTTPStatus), "%s: %v", op, err)
	case errors.Is(err, tracker.ErrNoBatchAPI):
		return status.Errorf(codes.InvalidArgument, "%s: %v", op, err)
	case errors.Is(err, tracker.ErrSubmitInProgress), errors.Is(err, tracker.ErrStateUnavailable):
		return status.Errorf(codes.Unavailable, "%s: %v", op, err)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "%s: %v", op, err)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "%s: %v", op, err)
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		// Already a status (the key source's), perhaps wrapped.
		return status.Errorf(s.Code(), "%s: %s", op, s.Message())
	}
	var netErr net.Error
	if errors.Is(err, tracker.ErrNoState) || errors.As(err, &netErr) {
		// No answer yet, or the vendor out of reach: worth a retry.
		return status.Errorf(codes.Unavailable, "%s: %v", op, err)
	}
	return status.Errorf(codes.Internal, "%s: %v", op, err)
}

// httpCodes are the codes of the vendor statuses that are the caller's
// mistake, or a limit it must back off from.
var httpCodes = map[int]codes.Code{
	http.StatusBadRequest:          codes.InvalidArgument,
	http.StatusUnprocessableEntity: codes.InvalidArgument,
	http.StatusUnauthorized:        codes.Unauthenticated,
	http.StatusForbidden:           codes.PermissionDenied,
	http.StatusNotFound:            codes.NotFound,
	http.StatusConflict:            codes.FailedPrecondition,
	http.StatusTooManyRequests:     codes.ResourceExhausted,
}

// codeForHTTP maps a vendor's HTTP status to a gRPC code; any status not
// in httpCodes is worth a retry.
func codeForHTTP(code int) codes.Code {
	if c, ok := httpCodes[code]; ok {
		return c
	}
	return codes.Unavailable
}
