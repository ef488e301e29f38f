package gateway

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
)

// turnEnd copies a supervisor TurnEnd into the public one; the two have
// the same fields by design.
func turnEnd(te *supervisorv1.TurnEnd) *realtimev1.TurnEnd {
	out := &realtimev1.TurnEnd{SessionId: te.GetSessionId(), IsError: te.GetIsError(), Reason: te.GetReason()}
	if te.ExitCode != nil {
		code := te.GetExitCode()
		out.ExitCode = &code
	}
	return out
}

// sessionStates are the public session states of the pod's.
var sessionStates = map[supervisorv1.SessionState]realtimev1.SessionState{
	supervisorv1.SessionState_SESSION_STATE_IDLE:   realtimev1.SessionState_SESSION_STATE_IDLE,
	supervisorv1.SessionState_SESSION_STATE_BUSY:   realtimev1.SessionState_SESSION_STATE_BUSY,
	supervisorv1.SessionState_SESSION_STATE_CLOSED: realtimev1.SessionState_SESSION_STATE_CLOSED,
}

// sessionState maps the pod's session state to the public one; a state
// the gateway does not know is UNSPECIFIED.
func sessionState(s supervisorv1.SessionState) realtimev1.SessionState {
	if st, ok := sessionStates[s]; ok {
		return st
	}
	return realtimev1.SessionState_SESSION_STATE_UNSPECIFIED
}

// info copies the pod's InfoResponse into the public GetSessionResponse.
func info(in *supervisorv1.InfoResponse) *realtimev1.GetSessionResponse {
	return &realtimev1.GetSessionResponse{
		SessionId: in.GetSessionId(), State: sessionState(in.GetState()), Turns: in.GetTurns(),
		StartedAt: in.GetStartedAt(), LastPromptAt: in.GetLastPromptAt(),
	}
}

// mapUpstream turns a session server's error into the caller's status,
// naming the Agent. What the pod says about the session (a turn is
// running, the session ended, bad text) reaches the caller with its code;
// a pod that cannot be reached is Unavailable; a pod refusing the run
// token is the platform's fault (the gateway and the controller disagree
// on the shared key), not the caller's, so Internal.
func mapUpstream(c *call, err error) error {
	st := status.Convert(err)
	id := c.target.Agent.Namespace + "/" + c.target.Agent.Name
	switch st.Code() {
	case codes.Unavailable:
		return status.Errorf(codes.Unavailable, "Agent %s: pod %s unreachable: %s", id, c.target.Pod, st.Message())
	case codes.Unauthenticated:
		return status.Errorf(codes.Internal, "Agent %s: the run pod refused the gateway's run token (shared key %s differs from the controller's?)", id, "agentplane-realtime-key")
	case codes.DeadlineExceeded, codes.Canceled:
		return st.Err()
	}
	return status.Errorf(st.Code(), "Agent %s: %s", id, st.Message())
}
