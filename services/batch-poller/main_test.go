package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/grpcauth"
	"github.com/agentplane/agentplane/libs/testenv"
	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tools/fakevendor"
	"github.com/agentplane/agentplane/tools/fakevendor/fakevendortest"

	"github.com/agentplane/agentplane/services/batch-poller/internal/config"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, testenv.Options{})) }

// TestServiceStartsFromFlagsServesAndStopsOnSignal runs the service as main
// wires it: flags, kubeconfig, NATS, fakevendor base URLs, the metrics and
// probe listeners apart, and the callers: gRPC health answers anyone, and
// BatchService the allowed ServiceAccount with a token for the audience.
func TestServiceStartsFromFlagsServesAndStopsOnSignal(t *testing.T) {
	ns := env.Namespace(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-secrets"}, StringData: map[string]string{"ANTHROPIC_API_KEY": "k"}}
	if _, err := env.Kube.CoreV1().Secrets(ns).Create(t.Context(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc, err := env.KubeconfigFor("batch-poller")
	if err != nil {
		t.Fatal(err)
	}
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	_, base := fakevendortest.Start(t, fakevendor.Options{APIKey: "k"})
	nsrv := eventstest.Start(t)
	got := make(chan *eventsv1.RunEvent, 4)
	if _, err := events.SubscribeBatchNotices(nsrv.Connect(), ns, "", func(ev *eventsv1.RunEvent) { got <- ev }); err != nil {
		t.Fatal(err)
	}
	ctl := env.Namespace(t)
	if _, err := env.Kube.CoreV1().ServiceAccounts(ctl).Create(t.Context(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent-controller"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grpcAddr, metricsAddr, healthAddr := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	cfg, err := config.Parse([]string{"--grpc-bind-address", grpcAddr, "--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", healthAddr, "--kubeconfig", kcPath,
		"--nats-url", nsrv.URL(), "--anthropic-base-url", base, "--shutdown-timeout", "2s",
		"--allowed-callers", grpcauth.ServiceAccountUsername(ctl, "agent-controller"), "--secret-namespaces", ns},
		func(k string) string { return map[string]string{"BATCH_POLL_SECONDS": "0.1"}[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.DiscardHandler)) }()

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ready := false
	for deadline := time.Now().Add(30 * time.Second); !ready && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
		ready = err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING
	}
	if !ready {
		t.Fatal("never became SERVING")
	}
	resp, err := http.Get("http://" + healthAddr + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	resp, err = http.Get("http://" + metricsAddr + "/metrics")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %v %v", resp, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), `agentplane_build_info{goversion=`) || !strings.Contains(string(body), `service="batch-poller"`) {
		t.Errorf("metrics lack agentplane_build_info:\n%s", body)
	}

	if _, err := batchv1.NewBatchServiceClient(conn).Get(t.Context(), &batchv1.GetRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a call without a token: err = %v, want Unauthenticated", err)
	}
	authed, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(grpcauth.NewRequestedToken(env.Kube, ctl, "agent-controller", config.DefaultTokenAudience, time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = authed.Close() }()
	c := batchv1.NewBatchServiceClient(authed)
	run := &batchv1.Run{Namespace: ns, Agent: "a1", Uid: "uid-main"}
	var sub *batchv1.SubmitResponse
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		// The key cache may see the Secret a moment after it was created.
		if sub, err = c.Submit(t.Context(), &batchv1.SubmitRequest{Run: run, Model: "claude-opus-5-5", Prompt: "hi", MaxTokens: 8}); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	select {
	case ev := <-got:
		if ev.GetBatch().GetBatchId() != sub.GetBatchId() || ev.GetRun().GetAgent() != "a1" {
			t.Errorf("notice = %v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notice from the background poll")
	}

	stop() // as SIGTERM would
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop")
	}
}
