package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
)

// TestCallersAreAuthenticatedAndAuthorised: a call without a token, with
// a token Kubernetes does not accept, or from a caller whose RBAC lacks the
// verb on agents/prompt is refused by the real TokenReview and
// SubjectAccessReview, and nothing of it reaches the run pod.
func TestCallersAreAuthenticatedAndAuthorised(t *testing.T) {
	ns := env.Namespace(t)
	mallory := caller(t, ns, "mallory")
	reader := caller(t, ns, "reader", "get")
	elsewhere := caller(t, env.Namespace(t), "elsewhere", "create", "get")
	r := running(t, ns, "chat")
	g := startGateway(t, 30*time.Second)
	ref := &realtimev1.AgentRef{Namespace: ns, Name: "chat"}

	for _, tc := range []struct {
		name, token string
		call        func(ctx context.Context) error
		code        codes.Code
		msg         string
	}{
		{"a prompt without a token is unauthenticated", "", prompt(g, ref), codes.Unauthenticated, "no bearer token"},
		{"a prompt with a forged token is unauthenticated", "not-a-kubernetes-token", prompt(g, ref), codes.Unauthenticated, "not accepted"},
		{"a close without a token is unauthenticated", "", closeCall(g, ref), codes.Unauthenticated, "no bearer token"},
		{"a prompt without any RBAC is denied", mallory, prompt(g, ref), codes.PermissionDenied, "may not create agents/prompt"},
		{"a close without any RBAC is denied", mallory, closeCall(g, ref), codes.PermissionDenied, "may not create agents/prompt"},
		{"a session query without any RBAC is denied", mallory, getSession(g, ref), codes.PermissionDenied, "may not get agents/prompt"},
		{"a prompt with only get is denied", reader, prompt(g, ref), codes.PermissionDenied, "may not create agents/prompt"},
		{"a role in another namespace grants nothing here", elsewhere, prompt(g, ref), codes.PermissionDenied, "may not create"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(bearer(tc.token))
			if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
				t.Fatalf("got %v, want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
	// Nothing reached the pod: no CLI started and the supervisor counts
	// no turn.
	if n := r.cliStarts(); n != 0 {
		t.Fatalf("%d CLI starts after refused calls", n)
	}
	if in := supervisorInfo(t, r); in.GetTurns() != 0 || in.GetState() != supervisorv1.SessionState_SESSION_STATE_IDLE {
		t.Fatalf("supervisor saw calls: %v", in)
	}
	// get alone is enough to ask where the session stands.
	if err := getSession(g, ref)(bearer(reader)); err != nil {
		t.Fatalf("GetSession with verb get: %v", err)
	}
}

// TestEachRoutingCaseHasItsCodeAndMessage: Agents that cannot take a
// prompt are refused with the code and message docs/realtime-gateway.md
// lists, as are bad requests.
func TestEachRoutingCaseHasItsCodeAndMessage(t *testing.T) {
	ns := env.Namespace(t)
	alice := caller(t, ns, "alice", "create", "get")

	newAgent(t, ns, "pending")
	finished := newAgent(t, ns, "finished")
	finished.podAt("127.0.0.1:1", true)
	finished.setPhase(agentsv1alpha1.PhaseSucceeded)
	failed := newAgent(t, ns, "failed")
	failed.setPhase(agentsv1alpha1.PhaseFailed)
	jobRun := newAgent(t, ns, "job-run")
	jobRun.podAt("127.0.0.1:1", false)
	jobRun.setPhase(agentsv1alpha1.PhaseRunning)
	noPod := newAgent(t, ns, "no-pod")
	noPod.runJob()
	noPod.setPhase(agentsv1alpha1.PhaseRunning)
	noJob := newAgent(t, ns, "no-job")
	noJob.setPhase(agentsv1alpha1.PhaseRunning)
	gone := newAgent(t, ns, "gone")
	gone.podAt(closedPort(t), true)
	gone.setPhase(agentsv1alpha1.PhaseRunning)
	impostor := newAgent(t, ns, "impostor")
	p := impostor.podAt("127.0.0.1:1", true)
	p.OwnerReferences = nil
	if _, err := env.Kube.CoreV1().Pods(ns).Update(context.Background(), p, metav1UpdateOptions); err != nil {
		t.Fatal(err)
	}
	impostor.setPhase(agentsv1alpha1.PhaseRunning)
	// A Job of the run's name that someone created before the controller
	// did, with a Ready pod it controls: the Agent does not control it.
	forged := newAgent(t, ns, "forged")
	forged.jobControlledBy(nil)
	forged.podAt("127.0.0.1:1", true)
	forged.setPhase(agentsv1alpha1.PhaseRunning)

	g := startGateway(t, 30*time.Second)
	for _, tc := range []struct {
		name, agent, text string
		code              codes.Code
		msg               string
	}{
		{"an unknown Agent is not found", "nobody", "hi", codes.NotFound, "Agent " + ns + "/nobody not found"},
		{"a Pending Agent is not Running yet", "pending", "hi", codes.FailedPrecondition, "is not Running yet (phase Pending)"},
		{"a Succeeded Agent's session has ended", "finished", "hi", codes.FailedPrecondition, "has finished (phase Succeeded): the session has ended"},
		{"a Failed Agent's session has ended", "failed", "hi", codes.FailedPrecondition, "has finished (phase Failed): the session has ended"},
		{"a Job run is not a realtime run", "job-run", "hi", codes.FailedPrecondition, "is not a realtime run"},
		{"a Running Agent without a pod is unavailable", "no-pod", "hi", codes.Unavailable, "has no pod yet"},
		{"a Running Agent whose Job does not exist is unavailable", "no-job", "hi", codes.Unavailable, "its Job agent-job-no-job does not exist"},
		{"a pod that does not answer is unreachable", "gone", "hi", codes.Unavailable, "unreachable"},
		{"a pod the Job does not control is never the run's", "impostor", "hi", codes.FailedPrecondition, "none is controlled by it"},
		{"a Job the Agent does not control is never the run's", "forged", "hi", codes.FailedPrecondition, "is not controlled by this Agent"},
		{"empty text is an invalid argument", "pending", "", codes.InvalidArgument, "text is empty"},
		{"a bad Agent name is an invalid argument", "Bad_Name", "hi", codes.InvalidArgument, "agent.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := g.prompt(alice, ns, tc.agent, tc.text)
			if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
				t.Fatalf("got %v, want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
	if got := testutilCount(g, "FailedPrecondition"); got != 6 {
		t.Fatalf("realtime_gateway_prompts_total{code=FailedPrecondition} = %v, want 6", got)
	}
}

func prompt(g *liveGateway, ref *realtimev1.AgentRef) func(context.Context) error {
	return func(ctx context.Context) error {
		s, err := g.client.Prompt(ctx, &realtimev1.PromptRequest{Agent: ref, Text: "hello"})
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
}

func closeCall(g *liveGateway, ref *realtimev1.AgentRef) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := g.client.Close(ctx, &realtimev1.CloseRequest{Agent: ref})
		return err
	}
}

func getSession(g *liveGateway, ref *realtimev1.AgentRef) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := g.client.GetSession(ctx, &realtimev1.GetSessionRequest{Agent: ref})
		return err
	}
}

// supervisorInfo asks the supervisor directly, with the run's token.
func supervisorInfo(t *testing.T, r *rtRun) *supervisorv1.InfoResponse {
	t.Helper()
	conn, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, err := supervisorv1.NewSessionServiceClient(conn).Info(ctx, &supervisorv1.InfoRequest{Token: realtime.Token(testKey, string(r.agent.UID))})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
