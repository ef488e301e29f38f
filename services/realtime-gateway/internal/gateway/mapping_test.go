package gateway

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/route"
)

// TestUpstreamErrorsMapToTheCallersView checks that what the run pod says
// reaches the caller with the right code and the Agent named, and that a
// refused run token is reported as the platform's fault.
func TestUpstreamErrorsMapToTheCallersView(t *testing.T) {
	c := &call{target: &route.Target{Agent: &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}, Pod: "p"}}
	for _, tc := range []struct {
		name string
		in   error
		code codes.Code
		msg  string
	}{
		{"a busy session stays FailedPrecondition", status.Error(codes.FailedPrecondition, "a turn is already running"), codes.FailedPrecondition, "Agent ns/a: a turn is already running"},
		{"bad text stays InvalidArgument", status.Error(codes.InvalidArgument, "text is empty"), codes.InvalidArgument, "Agent ns/a: text is empty"},
		{"a transport failure is pod unreachable", status.Error(codes.Unavailable, "connection refused"), codes.Unavailable, "pod p unreachable"},
		{"a refused run token is Internal", status.Error(codes.Unauthenticated, "wrong token"), codes.Internal, "refused the gateway's run token"},
		{"a plain error is Unknown with the Agent named", errors.New("boom"), codes.Unknown, "Agent ns/a: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := status.Convert(mapUpstream(c, tc.in))
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
				t.Fatalf("got %v %q, want %v containing %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
		})
	}
}

// TestTurnEndAndInfoCopyEveryField checks the supervisor → public copies.
func TestTurnEndAndInfoCopyEveryField(t *testing.T) {
	code := int32(2)
	te := turnEnd(&supervisorv1.TurnEnd{SessionId: "s", IsError: true, Reason: "exit-code", ExitCode: &code})
	if te.GetSessionId() != "s" || !te.GetIsError() || te.GetReason() != "exit-code" || te.ExitCode == nil || te.GetExitCode() != 2 {
		t.Fatalf("turn end %v", te)
	}
	if te := turnEnd(&supervisorv1.TurnEnd{SessionId: "s"}); te.ExitCode != nil {
		t.Fatal("an unset exit code became set")
	}
	for in, want := range map[supervisorv1.SessionState]string{
		supervisorv1.SessionState_SESSION_STATE_IDLE:        "SESSION_STATE_IDLE",
		supervisorv1.SessionState_SESSION_STATE_BUSY:        "SESSION_STATE_BUSY",
		supervisorv1.SessionState_SESSION_STATE_CLOSED:      "SESSION_STATE_CLOSED",
		supervisorv1.SessionState_SESSION_STATE_UNSPECIFIED: "SESSION_STATE_UNSPECIFIED",
	} {
		got := info(&supervisorv1.InfoResponse{SessionId: "s", State: in, Turns: 3})
		if got.GetState().String() != want || got.GetTurns() != 3 || got.GetSessionId() != "s" {
			t.Fatalf("info(%v) = %v", in, got)
		}
	}
}
