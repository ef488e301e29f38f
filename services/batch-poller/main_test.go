package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	"github.com/agentplane/agentplane/libs/natsauth"
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
	// NATS as installed: operator mode, batch-poller with its own
	// service credential.
	authority, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	nsrv := eventstest.StartSecured(t, authority)
	creds, err := authority.Issuer().ServiceCredentials("batch-poller", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
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
		"--nats-url", nsrv.URL(), "--nats-creds-file", eventstest.WriteCreds(t, creds), "--anthropic-base-url", base, "--shutdown-timeout", "2s",
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

// TestCompletionNoticesNeedAServiceCredential: against NATS in operator
// mode, batch-poller's notices go out with the credential the
// installation minted for it; without one, or with one the server does
// not trust or that has expired, the server refuses the connection and
// batch-poller says so once in its log, so nobody can publish notices
// (which make the agent-controller read a batch) without a credential.
func TestCompletionNoticesNeedAServiceCredential(t *testing.T) {
	authority, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	mint := func(a *natsauth.Authority, expires time.Time) []byte {
		b, err := a.Issuer().ServiceCredentials("batch-poller", expires)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name  string
		creds []byte
		// refused is what the server answers; empty when the notice
		// must arrive.
		refused string
	}{
		{"a service credential of the installation publishes notices", mint(authority, time.Time{}), ""},
		{"a connection without a credential is refused", nil, "authorization violation"},
		{"a credential another authority minted is refused", mint(stranger, time.Time{}), "authorization violation"},
		{"an expired credential is refused", mint(authority, time.Now().Add(-time.Minute)), "authorization violation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := eventstest.StartSecured(t, authority)
			got := make(chan *eventsv1.RunEvent, 1)
			watcher := srv.Connect()
			if _, err := events.SubscribeBatchNotices(watcher, "team-a", "", func(ev *eventsv1.RunEvent) { got <- ev }); err != nil {
				t.Fatal(err)
			}
			if err := watcher.Flush(); err != nil {
				t.Fatal(err)
			}
			args := []string{"--nats-url", srv.URL(), "--allowed-callers", "system:serviceaccount:agentplane-system:agent-controller"}
			if tc.creds != nil {
				args = append(args, "--nats-creds-file", eventstest.WriteCreds(t, tc.creds))
			}
			cfg, err := config.Parse(args, func(string) string { return "" }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var logs lockedBuffer
			nc, err := connectNATS(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			notice := &eventsv1.RunEvent{Run: &eventsv1.RunIdentity{Namespace: "team-a", Agent: "a1", Uid: "u1"}}
			if tc.refused == "" {
				// Published while the first connection is being made, it
				// is sent once it is up.
				if err := events.PublishBatchNotice(nc, notice); err != nil {
					t.Fatal(err)
				}
				select {
				case ev := <-got:
					if ev.GetRun().GetAgent() != "a1" {
						t.Errorf("notice = %v", ev)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("no notice arrived; log:\n%s", logs.String())
				}
				return
			}
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(strings.ToLower(logs.String()), tc.refused); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the log does not say %q; connected: %v; log:\n%s", tc.refused, nc.IsConnected(), logs.String())
				}
			}
			if nc.IsConnected() {
				t.Fatal("the connection is up")
			}
			if err := events.PublishBatchNotice(nc, notice); err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-got:
				t.Fatalf("a notice arrived without a trusted credential: %v", ev)
			case <-time.After(time.Second):
			}
			if n := strings.Count(logs.String(), "NATS unavailable"); n != 1 {
				t.Errorf("the refusal is logged %d times, want once:\n%s", n, logs.String())
			}
		})
	}
}

// lockedBuffer is a log sink the NATS callbacks and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
