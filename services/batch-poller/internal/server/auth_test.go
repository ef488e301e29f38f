package server

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	"github.com/agentplane/agentplane/tools/fakevendor"
)

// TestOnlyAgentControllerMayCall performs the attacks of a pod that
// reaches batch-poller's port: calls without a token, with a tenant's
// ServiceAccount token, with agent-controller's token not meant for
// batch-poller, with a forged one. Each is refused before it reaches the
// vendor; submitting under another namespace's key (the tenant's Submit
// naming the victim's namespace and key) is among them.
func TestOnlyAgentControllerMayCall(t *testing.T) {
	s := startStack(t, map[string]string{"ANTHROPIC_API_KEY": goodKey, "VICTIM_KEY": goodKey})
	tenant := env.Namespace(t)
	victim := s.run("victim-uid")
	victim.ApiKeyKey = "VICTIM_KEY"
	ref := &batchv1.BatchRef{Run: victim, Provider: batchv1.Provider_PROVIDER_ANTHROPIC, BatchId: "msgbatch_victim", Model: "claude-opus-5-5"}
	calls := map[string]func(c batchv1.BatchServiceClient) error{
		"submit billed to another namespace's key": func(c batchv1.BatchServiceClient) error {
			_, err := c.Submit(t.Context(), &batchv1.SubmitRequest{Run: victim, Model: "claude-opus-5-5", Prompt: "mine now", MaxTokens: 8})
			return err
		},
		"get of another tenant's batch": func(c batchv1.BatchServiceClient) error {
			_, err := c.Get(t.Context(), &batchv1.GetRequest{Batch: ref})
			return err
		},
		"cancel of another tenant's batch": func(c batchv1.BatchServiceClient) error {
			_, err := c.Cancel(t.Context(), &batchv1.CancelRequest{Batch: ref})
			return err
		},
		"delete of another tenant's batch": func(c batchv1.BatchServiceClient) error {
			_, err := c.Delete(t.Context(), &batchv1.DeleteRequest{Batch: ref})
			return err
		},
	}
	attackers := []struct {
		name  string
		token string
		code  codes.Code
	}{
		{"no token is unauthenticated", "", codes.Unauthenticated},
		{"a tenant ServiceAccount's token for batch-poller's audience is permission denied",
			token(t, tenant, "default", audience), codes.PermissionDenied},
		{"agent-controller's plain API token (no audience) is refused",
			token(t, s.ctl, "agent-controller"), codes.Unauthenticated},
		{"agent-controller's token for another service's audience is refused",
			token(t, s.ctl, "agent-controller", "agentplane-realtime-gateway"), codes.Unauthenticated},
		{"a forged token is unauthenticated", "eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl", codes.Unauthenticated},
	}
	before := s.fv.AllCalls()
	for _, a := range attackers {
		c := clientAs(t, s.addr, a.token)
		for call, do := range calls {
			t.Run(a.name+": "+call, func(t *testing.T) {
				if err := do(c); status.Code(err) != a.code {
					t.Errorf("err = %v, want %v", err, a.code)
				}
			})
		}
	}
	if after := s.fv.AllCalls(); !maps.Equal(before, after) {
		t.Errorf("refused calls reached the vendor: before %v, after %v", before, after)
	}
	t.Run("agent-controller's token for the audience is served", func(t *testing.T) {
		c := clientAs(t, s.addr, token(t, s.ctl, "agent-controller", audience))
		if _, err := c.Submit(t.Context(), &batchv1.SubmitRequest{Run: s.run("served"), Model: "claude-opus-5-5", Prompt: "p", MaxTokens: 8}); err != nil {
			t.Errorf("submit: %v", err)
		}
	})
	t.Run("gRPC health and reflection stay open to probes without a token", func(t *testing.T) {
		conn := dialAs(t, s.addr, "")
		if r, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health = %v %v", r, err)
		}
		st, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
		if err == nil {
			err = st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		}
		if err == nil {
			_, err = st.Recv()
		}
		if err != nil {
			t.Errorf("reflection: %v", err)
		}
	})
}

// TestARunReachesOnlyItsOwnBatch performs, as the allowed caller, the
// attacks a confused deputy could relay: naming another run's batch id
// from another namespace or another uid, to read, cancel or delete it,
// and submitting first under a victim's uid. Both namespaces use the same
// vendor account, the worst case: only batch-poller's table tells the
// runs apart.
func TestARunReachesOnlyItsOwnBatch(t *testing.T) {
	s := startStack(t, map[string]string{"ANTHROPIC_API_KEY": goodKey})
	other := env.Namespace(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "agent-secrets"}, StringData: map[string]string{"ANTHROPIC_API_KEY": goodKey}}
	if _, err := env.Kube.CoreV1().Secrets(other).Create(t.Context(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	submit := func(run *batchv1.Run, prompt string) *batchv1.BatchRef {
		t.Helper()
		var resp *batchv1.SubmitResponse
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			// The key cache may see a Secret a moment after it was created.
			if resp, err = s.client.Submit(ctx, &batchv1.SubmitRequest{Run: run, Model: "claude-opus-5-5", Prompt: prompt, MaxTokens: 64}); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		return &batchv1.BatchRef{Run: run, Provider: resp.GetProvider(), BatchId: resp.GetBatchId(), Model: "claude-opus-5-5"}
	}
	runA := s.run("uid-a")
	runB := &batchv1.Run{Namespace: other, Agent: "agent-b", Uid: "uid-b"}
	a, b := submit(runA, "secret of A"), submit(runB, "secret of B")
	as := func(run *batchv1.Run, of *batchv1.BatchRef) *batchv1.BatchRef {
		return &batchv1.BatchRef{Run: run, Provider: of.GetProvider(), BatchId: of.GetBatchId(), Model: of.GetModel()}
	}
	sameUIDOtherNS := &batchv1.Run{Namespace: other, Agent: runA.GetAgent(), Uid: runA.GetUid()}
	otherUIDSameNS := &batchv1.Run{Namespace: runA.GetNamespace(), Agent: runA.GetAgent(), Uid: "uid-other"}
	cases := []struct {
		name string
		call func() error
	}{
		{"run A reading run B's result is not found", func() error {
			_, err := s.client.Get(ctx, &batchv1.GetRequest{Batch: as(runA, b)})
			return err
		}},
		{"a run of another namespace with A's uid reading A's batch is not found", func() error {
			_, err := s.client.Get(ctx, &batchv1.GetRequest{Batch: as(sameUIDOtherNS, a)})
			return err
		}},
		{"another uid in A's namespace reading A's batch is not found", func() error {
			_, err := s.client.Get(ctx, &batchv1.GetRequest{Batch: as(otherUIDSameNS, a)})
			return err
		}},
		{"run B cancelling A's batch is not found", func() error {
			_, err := s.client.Cancel(ctx, &batchv1.CancelRequest{Batch: as(runB, a)})
			return err
		}},
		{"another uid cancelling A's batch is not found", func() error {
			_, err := s.client.Cancel(ctx, &batchv1.CancelRequest{Batch: as(otherUIDSameNS, a)})
			return err
		}},
		{"run B deleting A's batch is not found", func() error {
			_, err := s.client.Delete(ctx, &batchv1.DeleteRequest{Batch: as(runB, a)})
			return err
		}},
		{"a run of another namespace with A's uid deleting A's batch is not found", func() error {
			_, err := s.client.Delete(ctx, &batchv1.DeleteRequest{Batch: as(sameUIDOtherNS, a)})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); status.Code(err) != codes.NotFound {
				t.Errorf("err = %v, want NotFound", err)
			}
		})
	}
	for route, n := range s.fv.AllCalls() {
		if (strings.Contains(route, "cancel") || strings.HasPrefix(route, "DELETE")) && n > 0 {
			t.Errorf("%s was called %d times: another run's batch was cancelled or deleted", route, n)
		}
	}

	t.Run("submitting first under a victim's uid from another namespace does not hand the victim that batch", func(t *testing.T) {
		planted := submit(&batchv1.Run{Namespace: other, Agent: "attacker", Uid: "uid-victim"}, "attacker's answer")
		own := submit(s.run("uid-victim"), "victim's question")
		if own.GetBatchId() == planted.GetBatchId() {
			t.Fatalf("the victim's Submit returned the attacker's batch %s", planted.GetBatchId())
		}
		if got := waitAnswer(t, s, own); got != fakevendor.Answer("victim's question") {
			t.Errorf("the victim's answer is %q", got)
		}
	})
	t.Run("each run still reads its own result", func(t *testing.T) {
		for ref, prompt := range map[*batchv1.BatchRef]string{a: "secret of A", b: "secret of B"} {
			if got := waitAnswer(t, s, ref); got != fakevendor.Answer(prompt) {
				t.Errorf("run %s/%s read %q", ref.GetRun().GetNamespace(), ref.GetRun().GetUid(), got)
			}
		}
	})
}

// waitAnswer asks Get until the batch ended and returns its answer.
func waitAnswer(t *testing.T, s *stack, ref *batchv1.BatchRef) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for ; ctx.Err() == nil; time.Sleep(period / 3) {
		got, err := s.client.Get(ctx, &batchv1.GetRequest{Batch: ref})
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if got.GetState() != batchv1.State_STATE_PENDING {
			return answerOf(ref.GetModel(), got)
		}
	}
	t.Fatal("the batch never ended")
	return ""
}
