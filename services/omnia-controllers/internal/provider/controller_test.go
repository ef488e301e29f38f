package provider

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/metrics"
)

const wait = 30 * time.Second

func start(t *testing.T) {
	t.Helper()
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("provider-controller"), ProbeCredentials: true, ProbeOverHTTP: true}
		return r.SetupWithManager(mgr, nil)
	})
}

// getProv reads the Provider "p" of ns through the API server.
//
//nolint:contextcheck // test helper: it makes its own context.Background(), the only context the tests here have; callers have nothing cancellable to pass
func getProv(ns string) (*omniav1.Provider, error) {
	p := &omniav1.Provider{}
	return p, env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "p"}, p)
}

func phaseIs(ns string, want omniav1.ProviderPhase, condType, reason string) func() error {
	return func() error {
		p, err := getProv(ns)
		if err != nil {
			return err
		}
		return ctrltest.PhaseReason(p.Status.Phase, p.Status.Conditions, want, condType, reason)
	}
}

// TestUnreachableEndpointRecheckedOnTimer: an endpoint that does not answer
// makes the Provider Unavailable and asks for a pass in 30s; once the
// endpoint listens, that timed pass (there is no other event) makes it
// Ready, and a reachable endpoint asks for no timer.
func TestUnreachableEndpointRecheckedOnTimer(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	addr := testenv.FreeAddr(t)
	p := &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeOllama, Model: "llama3", BaseURL: "http://" + addr}}
	ctrltest.Create(t, env, p)
	direct := &Reconciler{Client: env.Client}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "p"}}
	res, err := direct.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter != UnreachableRetry {
		t.Fatalf("unreachable: %+v %v, want RequeueAfter 30s and no error", res, err)
	}
	ctrltest.Eventually(t, wait, phaseIs(ns, omniav1.ProviderPhaseUnavailable, omniav1.ConditionEndpointReachable, omniav1.ReasonEndpointUnreachable))

	start(t)
	time.Sleep(time.Second)
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second} // 404 still counts as reachable
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s was taken meanwhile: %v", addr, err)
	}
	go func() { _ = srv.Serve(l) }()
	defer func() { _ = srv.Close() }()
	ctrltest.Eventually(t, 45*time.Second, phaseIs(ns, omniav1.ProviderPhaseReady, omniav1.ConditionEndpointReachable, omniav1.ReasonEndpointReachable))

	res, err = direct.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter != 0 {
		t.Fatalf("reachable: %+v %v, want no timer and no error", res, err)
	}
}

// TestCredentialSecretFlow: a missing Secret is an error (retried); the
// Secret watch brings the Provider to Ready with the vendor accepting the
// key; rotating to a rejected key makes it Error with a CredentialInvalid
// event.
func TestCredentialSecretFlow(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/v1/models":
			w.WriteHeader(http.StatusNotFound)
		case r.Header.Get("Authorization") == "Bearer sk-good":
			_, _ = w.Write([]byte(`{"data":[]}`))
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer vendor.Close()
	p := &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeOpenAI, Model: "gpt-4o", BaseURL: vendor.URL,
			Credential: &omniav1.CredentialConfig{SecretRef: &omniav1.SecretKeyRef{Name: "openai"}}}}
	ctrltest.Create(t, env, p)
	direct := &Reconciler{Client: env.Client}
	if res, err := direct.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "p"}}); err == nil || res.RequeueAfter != 0 {
		t.Fatalf("missing Secret: %+v %v, want an error", res, err)
	}
	ctrltest.Eventually(t, wait, phaseIs(ns, omniav1.ProviderPhaseError, omniav1.ConditionSecretFound, omniav1.ReasonSecretNotFound))

	start(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "openai", Namespace: ns, Labels: map[string]string{omniav1.LabelType: omniav1.LabelTypeCredentials}}, Data: map[string][]byte{"OPENAI_API_KEY": []byte("sk-good")}}
	ctrltest.Create(t, env, sec)
	ctrltest.Eventually(t, wait, phaseIs(ns, omniav1.ProviderPhaseReady, omniav1.ConditionCredentialValid, omniav1.ReasonCredentialAccepted))

	sec.Data["OPENAI_API_KEY"] = []byte("sk-bad")
	if err := env.Client.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, phaseIs(ns, omniav1.ProviderPhaseError, omniav1.ConditionCredentialValid, omniav1.ReasonCredentialRejected))
	ctrltest.Eventually(t, wait, func() error {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == omniav1.EventCredentialInvalid && e.Type == corev1.EventTypeWarning {
				if strings.Contains(e.Note, "sk-bad") {
					return fmt.Errorf("event leaks the key: %q", e.Note)
				}
				return nil
			}
		}
		return fmt.Errorf("no CredentialInvalid event among %d", len(evs.Items))
	})
}

// TestDeletedProviderVerdictDropped: the credential verdict of a deleted
// Provider goes with it, so the probe cache holds only Providers that
// exist: the same Provider created again, over the very same Secret
// version, is probed afresh.
func TestDeletedProviderVerdictDropped(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	var calls atomic.Int32
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			calls.Add(1)
		}
		_, _ = w.Write([]byte(`{"data":[]}`))
	}))
	defer vendor.Close()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "openai", Namespace: ns, Labels: map[string]string{omniav1.LabelType: omniav1.LabelTypeCredentials}}, Data: map[string][]byte{"OPENAI_API_KEY": []byte("sk-good")}}
	newProvider := func() *omniav1.Provider {
		return &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
			Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeOpenAI, Model: "gpt-4o", BaseURL: vendor.URL,
				Credential: &omniav1.CredentialConfig{SecretRef: &omniav1.SecretKeyRef{Name: "openai"}}}}
	}
	p := newProvider()
	for _, o := range []client.Object{sec, p} {
		ctrltest.Create(t, env, o)
	}
	r := &Reconciler{Client: env.Client, ProbeCredentials: true, ProbeOverHTTP: true}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "p"}}
	for i := 0; i < 2; i++ {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d probes for two passes over one Secret version, want 1 (the second cached)", n)
	}
	if err := env.Client.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, func() error {
		if _, err := r.Reconcile(ctx, req); err != nil {
			return err
		}
		if _, err := getProv(ns); err == nil {
			return fmt.Errorf("Provider not gone yet")
		}
		return nil
	})
	ctrltest.Create(t, env, newProvider())
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d probes; want the re-created Provider probed afresh (2), not the deleted one's verdict reused", n)
	}
}

// TestReadyMetricFollowsTheProvider: omnia_provider_ready is 1 for a Ready
// Provider and 0 for one that is not, and a deleted Provider's series is
// gone.
func TestReadyMetricFollowsTheProvider(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	start(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	ready := &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeMock}}
	unreachable := &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "down", Namespace: ns},
		Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeOllama, Model: "llama3", BaseURL: "http://" + closed}}
	for _, p := range []*omniav1.Provider{ready, unreachable} {
		ctrltest.Create(t, env, p)
	}
	series := func(name string) prometheus.Labels { return prometheus.Labels{"namespace": ns, "provider": name} }
	ctrltest.Eventually(t, wait, phaseIs(ns, omniav1.ProviderPhaseReady, omniav1.ConditionReady, ReasonReady))
	ctrltest.Eventually(t, wait, ctrltest.MetricIs(metrics.ProviderReady, series("p"), 1))
	ctrltest.Eventually(t, wait, ctrltest.MetricIs(metrics.ProviderReady, series("down"), 0))

	if err := env.Client.Delete(ctx, ready); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, ctrltest.MetricGone(metrics.ProviderReady, series("p")))
	ctrltest.Holds(t, ctrltest.MetricIs(metrics.ProviderReady, series("down"), 0))
}
