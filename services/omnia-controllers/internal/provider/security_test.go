package provider

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// keyCatcher is a server a Provider's author controls: it records every
// request that carries the victim's key in any header.
type keyCatcher struct {
	mu   sync.Mutex
	hits []string
	key  string
}

func (k *keyCatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for name, vals := range r.Header {
		for _, v := range vals {
			if v == k.key || v == "Bearer "+k.key {
				k.mu.Lock()
				k.hits = append(k.hits, fmt.Sprintf("%s %s (%s)", r.Method, r.URL.Path, name))
				k.mu.Unlock()
			}
		}
	}
	_, _ = w.Write([]byte(`{"data":[]}`))
}

func (k *keyCatcher) caught() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.hits...)
}

// startProbing runs the Provider controller with the probe on, the
// binary's cache limits, and an HTTP client that trusts hc's servers.
func startProbing(t *testing.T, hc *http.Client, overHTTP bool) {
	t.Helper()
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("provider-controller"),
			ProbeCredentials: true, ProbeOverHTTP: overHTTP, HTTP: hc}
		return r.SetupWithManager(mgr, nil)
	})
}

func victimSecret(ns, key string, optedIn bool) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-key", Namespace: ns},
		Data: map[string][]byte{"ANTHROPIC_API_KEY": []byte(key)}}
	if optedIn {
		s.Labels = map[string]string{omniav1.LabelType: omniav1.LabelTypeCredentials}
	}
	return s
}

func attackerProvider(ns, baseURL string) *omniav1.Provider {
	return &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeClaude, Model: "claude-sonnet-4", BaseURL: baseURL,
			Credential: &omniav1.CredentialConfig{SecretRef: &omniav1.SecretKeyRef{Name: "team-key"}}}}
}

// TestTheProbeSendsNoKeyAProviderMayNotUse performs the attack of a user
// who may create Providers but not read Secrets: a Provider whose baseURL
// is their own server and whose secretRef names a Secret of the namespace.
// Each case says why the key must not reach that server; the last case is
// the control that shows the server would catch a key that is sent.
func TestTheProbeSendsNoKeyAProviderMayNotUse(t *testing.T) {
	const key = "sk-ant-victim-0123456789"
	cases := []struct {
		name     string
		tls      bool
		overHTTP bool
		optedIn  bool
		redirect bool
		// wantReason is the CredentialValid reason, or "" when the Secret
		// is not seen at all (SecretFound False).
		wantReason string
		wantSent   bool
	}{
		{name: "a Secret that did not opt in to Provider use is never read", tls: true, optedIn: false},
		{name: "the key is never sent over plain http", tls: false, optedIn: true, wantReason: omniav1.ReasonCredentialProbeRefused},
		{name: "control: the flag lets plain http reach a loopback vendor", tls: false, overHTTP: true, optedIn: true, wantReason: omniav1.ReasonCredentialAccepted, wantSent: true},
		{name: "a redirect is not followed with the key", tls: true, optedIn: true, redirect: true, wantReason: omniav1.ReasonCredentialValidationError},
		{name: "control: an opted-in Secret over https is probed", tls: true, optedIn: true, wantReason: omniav1.ReasonCredentialAccepted, wantSent: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			catcher := &keyCatcher{key: key}
			var vendor *httptest.Server
			target := httptest.NewTLSServer(catcher)
			defer target.Close()
			switch {
			case tc.redirect:
				vendor = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/v1/models" {
						http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
						return
					}
					w.WriteHeader(http.StatusNotFound)
				}))
			case tc.tls:
				vendor = target
			default:
				vendor = httptest.NewServer(catcher)
			}
			if vendor != target {
				defer vendor.Close()
			}
			// One client trusts both TLS servers (httptest shares its
			// certificate), as a real client trusts real vendors.
			startProbing(t, target.Client(), tc.overHTTP)
			for _, o := range []client.Object{victimSecret(ns, key, tc.optedIn), attackerProvider(ns, vendor.URL)} {
				ctrltest.Create(t, env, o)
			}
			if tc.wantReason == "" {
				ctrltest.Eventually(t, wait, phaseIs(ns, omniav1.ProviderPhaseError, omniav1.ConditionSecretFound, omniav1.ReasonSecretNotFound))
			} else {
				ctrltest.Eventually(t, wait, func() error {
					p, err := getProv(ns)
					if err != nil {
						return err
					}
					for _, c := range p.Status.Conditions {
						if c.Type == omniav1.ConditionCredentialValid && c.Reason == tc.wantReason {
							return nil
						}
					}
					return fmt.Errorf("no CredentialValid condition with reason %s in %+v", tc.wantReason, p.Status.Conditions)
				})
			}
			if got := catcher.caught(); (len(got) > 0) != tc.wantSent {
				t.Fatalf("requests carrying the key: %v; want sent=%v", got, tc.wantSent)
			}
		})
	}
}

// TestTheCacheHoldsOnlyOptedInSecrets: the controllers' cache never holds a
// Secret that did not opt in, so no controller can read, probe or mount
// it, whatever object names it.
func TestTheCacheHoldsOnlyOptedInSecrets(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	var mgrClient client.Client
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		mgrClient = mgr.GetClient()
		return (&Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, nil)
	})
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-password", Namespace: ns}, Data: map[string][]byte{"p": []byte("x")}}
	opted := victimSecret(ns, "sk", true)
	for _, o := range []client.Object{other, opted} {
		ctrltest.Create(t, env, o)
	}
	ctrltest.Eventually(t, wait, func() error {
		var l corev1.SecretList
		if err := mgrClient.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(l.Items) != 1 || l.Items[0].Name != opted.Name {
			names := []string{}
			for _, s := range l.Items {
				names = append(names, s.Name)
			}
			return fmt.Errorf("cached Secrets %v, want only %s", names, opted.Name)
		}
		return nil
	})
}

// TestProbeURLPolicy: where the credential probe may send a key.
func TestProbeURLPolicy(t *testing.T) {
	cases := []struct {
		name, url string
		overHTTP  bool
		ok        bool
	}{
		{"https goes anywhere", "https://api.anthropic.com", false, true},
		{"https with a port", "https://models.example.com:8443/v1", false, true},
		{"plain http is refused by default", "http://127.0.0.1:8080", false, false},
		{"plain http to loopback with the flag", "http://127.0.0.1:8080", true, true},
		{"plain http to IPv6 loopback with the flag", "http://[::1]:8080", true, true},
		{"plain http to localhost with the flag", "http://localhost:11434", true, true},
		{"plain http to a cluster Service with the flag", "http://vllm.models.svc:8000", true, true},
		{"plain http to a fully qualified cluster Service with the flag", "http://vllm.models.svc.cluster.local", true, true},
		{"plain http to a public name even with the flag", "http://attacker.example.com", true, false},
		{"plain http to a name that only ends in svc", "http://evilsvc.example", true, false},
		{"plain http to a non-loopback address even with the flag", "http://10.1.2.3", true, false},
		{"another scheme", "ftp://example.com", true, false},
		{"no host", "https:///v1", false, false},
		{"not a URL", "://", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkProbeURL(tc.url, tc.overHTTP)
			if (err == nil) != tc.ok {
				t.Fatalf("checkProbeURL(%q, %v) = %v, want ok=%v", tc.url, tc.overHTTP, err, tc.ok)
			}
		})
	}
}
