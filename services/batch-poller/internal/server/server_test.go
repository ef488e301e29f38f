package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentplane/agentplane/libs/grpcauth"
	"github.com/agentplane/agentplane/libs/service"
	"github.com/agentplane/agentplane/libs/service/servicetest"
	"github.com/agentplane/agentplane/libs/testenv"
	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	"github.com/agentplane/agentplane/tools/fakevendor"
	"github.com/agentplane/agentplane/tools/fakevendor/fakevendortest"

	"github.com/agentplane/agentplane/services/batch-poller/internal/keys"
	"github.com/agentplane/agentplane/services/batch-poller/internal/metrics"
	"github.com/agentplane/agentplane/services/batch-poller/internal/tracker"
	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, testenv.Options{})) }

const (
	goodKey = "sk-good-key-value"
	period  = 150 * time.Millisecond
)

// stack is the whole service on real parts: envtest Secrets and
// TokenReviews, fakevendor over HTTP and the gRPC server on a real
// listener. client calls as the allowed caller, the ServiceAccount
// agent-controller of namespace ctl, with a token for the audience.
type stack struct {
	ns     string
	ctl    string
	addr   string
	fv     *fakevendor.Server
	client batchv1.BatchServiceClient
	conn   *grpc.ClientConn
	m      *metrics.Metrics
	src    *keys.Source
	done   chan error
	cancel context.CancelFunc
}

func startStack(t *testing.T, secretData map[string]string) *stack {
	t.Helper()
	s := &stack{ns: env.Namespace(t), ctl: env.Namespace(t), m: metrics.New(), done: make(chan error, 1)}
	allowed := serviceAccount(t, s.ctl, "agent-controller")
	if secretData != nil {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "agent-secrets"}, StringData: secretData}
		if _, err := env.Kube.CoreV1().Secrets(s.ns).Create(t.Context(), sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	fv, base := fakevendortest.Start(t, fakevendor.Options{APIKey: goodKey, PollsUntilEnded: 2})
	s.fv = fv
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.src = keys.New(env.Kube)
	s.src.Start(ctx)
	if !s.src.WaitForSync(ctx, 30*time.Second) {
		t.Fatal("key cache never synced")
	}
	if secretData != nil {
		// The informer sees the Secret a moment after it was created.
		deadline := time.Now().Add(10 * time.Second)
		for _, err := s.src.Key(ctx, s.ns, "ANTHROPIC_API_KEY"); err != nil && status.Code(err) == codes.FailedPrecondition &&
			strings.Contains(err.Error(), "has no Secret") && time.Now().Before(deadline); _, err = s.src.Key(ctx, s.ns, "ANTHROPIC_API_KEY") {
			time.Sleep(20 * time.Millisecond)
		}
	}
	hc := vendor.NewHTTPClient(64, 10*time.Second)
	tr := tracker.New([]vendor.Adapter{vendor.NewAnthropic(base, hc), vendor.NewOpenAI(base+"/v1", hc), vendor.NewGemini(base, hc)},
		s.src, tracker.Options{Period: period, DefaultKeyName: keys.DefaultKeyName, Metrics: s.m})
	go tr.Run(ctx)
	guard := grpcauth.Guard{
		Authn:     grpcauth.NewAuthenticator(env.Kube, grpcauth.Options{TTL: time.Second, Audiences: []string{audience}}),
		Authorize: grpcauth.AllowUsers(allowed),
	}
	g, err := NewGRPC(slog.New(slog.DiscardHandler), s.m.Registry, NewService(tr), guard)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.addr = g.Addr().String()
	go func() { s.done <- g.Serve(ctx, 2*time.Second) }()
	// The allowed caller's token comes through the TokenRequest API, as
	// agent-controller's does outside a pod.
	s.conn, err = grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(grpcauth.NewRequestedToken(env.Kube, s.ctl, "agent-controller", audience, time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.conn.Close(); s.shutdown(t) })
	s.client = batchv1.NewBatchServiceClient(s.conn)
	return s
}

// shutdown stops the server as SIGTERM would and checks it returned.
func (s *stack) shutdown(t *testing.T) {
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("server did not stop")
	}
}

func (s *stack) run(uid string) *batchv1.Run {
	return &batchv1.Run{Namespace: s.ns, Agent: "agent-" + uid, Uid: uid}
}

func TestEndToEndOverGRPC(t *testing.T) {
	s := startStack(t, map[string]string{"ANTHROPIC_API_KEY": goodKey, "OPENAI_API_KEY": goodKey, "GEMINI_API_KEY": goodKey})
	ctx := t.Context()
	models := []string{"claude-opus-5-5", "gpt-5", "gemini-3-flash"}
	for _, model := range models {
		t.Run(model+": submit, get until answered, cancel after the end, delete", func(t *testing.T) {
			run := s.run("uid-" + model)
			sub, err := s.client.Submit(ctx, &batchv1.SubmitRequest{Run: run, Model: model, Prompt: "hello", MaxTokens: 64})
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
			again, err := s.client.Submit(ctx, &batchv1.SubmitRequest{Run: run, Model: model, Prompt: "hello", MaxTokens: 64})
			if err != nil || again.GetBatchId() != sub.GetBatchId() {
				t.Fatalf("second submit = %v %v, want the same batch", again, err)
			}
			ref := &batchv1.BatchRef{Run: run, Provider: sub.GetProvider(), BatchId: sub.GetBatchId(), Model: model}
			var got *batchv1.GetResponse
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(period / 3) {
				if got, err = s.client.Get(ctx, &batchv1.GetRequest{Batch: ref}); err != nil {
					t.Fatalf("get: %v", err)
				}
				if got.GetState() != batchv1.State_STATE_PENDING {
					break
				}
			}
			if got.GetState() != batchv1.State_STATE_SUCCEEDED || got.GetCheckedAt() == nil {
				t.Fatalf("get = %v", got)
			}
			if answer := answerOf(model, got); answer != fakevendor.Answer("hello") {
				t.Errorf("answer = %q", answer)
			}
			c, err := s.client.Cancel(ctx, &batchv1.CancelRequest{Batch: ref})
			if err != nil || c.GetState() != batchv1.State_STATE_SUCCEEDED {
				t.Errorf("cancel after the end = %v %v", c, err)
			}
			if _, err := s.client.Delete(ctx, &batchv1.DeleteRequest{Batch: ref}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		})
	}
	for name, live := range s.fv.Live() {
		if len(live) != 0 {
			t.Errorf("%s left behind: %v", name, live)
		}
	}
	t.Run("health answers SERVING for the server and BatchService", func(t *testing.T) {
		h := healthpb.NewHealthClient(s.conn)
		for _, svc := range []string{"", batchv1.BatchService_ServiceDesc.ServiceName} {
			r, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health(%q) = %v %v", svc, r, err)
			}
		}
	})
	t.Run("reflection lists BatchService", func(t *testing.T) {
		st, err := reflectionpb.NewServerReflectionClient(s.conn).ServerReflectionInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, svc := range r.GetListServicesResponse().GetService() {
			found = found || svc.GetName() == batchv1.BatchService_ServiceDesc.ServiceName
		}
		if !found {
			t.Errorf("services = %v", r.GetListServicesResponse().GetService())
		}
	})
	t.Run("metrics count the vendor calls, finished batches and gRPC calls", func(t *testing.T) {
		h := service.NewHTTPServer(slog.New(slog.DiscardHandler), s.m.Registry)
		AddProbes(h, s.src.Synced)
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body := rec.Body.String()
		for _, want := range []string{`batch_poller_vendor_calls_total{op="poll",outcome="ok",provider="anthropic"}`,
			`batch_poller_batches_finished_total{provider="gemini",state="succeeded"} 1`, "batch_poller_batches_in_flight 0",
			"batch_poller_vendor_call_seconds_bucket",
			`grpc_server_handled_total{grpc_code="OK",grpc_method="Submit",grpc_service="agentplane.batch.v1.BatchService"`} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		for _, path := range []string{"/healthz", "/readyz"} {
			rec := httptest.NewRecorder()
			h.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			if rec.Code != http.StatusOK {
				t.Errorf("%s = %d", path, rec.Code)
			}
		}
	})
	t.Run("metrics, gRPC's and build info included, pass promlint", func(t *testing.T) {
		if err := service.RegisterBuildInfo(s.m.Registry, "batch-poller"); err != nil {
			t.Fatal(err)
		}
		servicetest.Lint(t, s.m.Registry)
	})
}
