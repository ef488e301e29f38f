package agentruntime

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/oidc"
)

const testKeySet = `{"keys":[{"kty":"EC","kid":"k1","crv":"P-256","x":"AA","y":"AA"}]}`

// TestJWKSFreshFor checks when a mirror is served from the Secret and for
// how long: only a readable fetch time younger than the refresh interval
// with a key set that still parses counts.
func TestJWKSFreshFor(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	secret := func(fetchedAt, data string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}, Data: map[string][]byte{}}
		if fetchedAt != "" {
			s.Annotations[omniav1.AnnotationOIDCJWKSFetchedAt] = fetchedAt
		}
		if data != "" {
			s.Data[JWKSKey] = []byte(data)
		}
		return s
	}
	cases := []struct {
		name string
		s    *corev1.Secret
		now  time.Time
		want time.Duration
	}{
		{"no Secret is not fresh", nil, t0, 0},
		{"a fresh mirror is served for the rest of its 6h", secret(t0.Format(time.RFC3339), testKeySet), t0.Add(5 * time.Hour), time.Hour},
		{"a mirror fetched just now is served for 6h", secret(t0.Format(time.RFC3339), testKeySet), t0, JWKSRefresh},
		{"a mirror 6h old is refetched", secret(t0.Format(time.RFC3339), testKeySet), t0.Add(JWKSRefresh), 0},
		{"a mirror without fetch time is refetched", secret("", testKeySet), t0, 0},
		{"an unreadable fetch time is refetched", secret("yesterday", testKeySet), t0, 0},
		{"a fetch time in the future is refetched", secret(t0.Add(time.Hour).Format(time.RFC3339), testKeySet), t0, 0},
		{"a mirror without jwks.json is refetched", secret(t0.Format(time.RFC3339), ""), t0, 0},
		{"a mirror whose key set no longer parses is refetched", secret(t0.Format(time.RFC3339), `{"keys":[]}`), t0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := jwksFreshFor(tc.s, tc.now); got != tc.want {
				t.Fatalf("jwksFreshFor = %s; want %s", got, tc.want)
			}
		})
	}
}

// TestBuildJWKSSecret: the mirror carries the credential-kind label the
// facade selects on, the agent's instance and managed-by labels, the fetch
// time, and the key set verbatim.
func TestBuildJWKSSecret(t *testing.T) {
	a := newAgent("ns", "support", nil)
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	s := buildJWKSSecret(a, []byte(testKeySet), at)
	if s.Name != "agent-support-oidc-jwks" || s.Namespace != "ns" {
		t.Fatalf("Secret %s/%s", s.Namespace, s.Name)
	}
	if s.Labels[omniav1.LabelCredentialKind] != omniav1.CredentialKindOIDCJWKS || s.Labels[LabelInstance] != "support" || s.Labels[LabelManagedBy] != ManagedBy {
		t.Fatalf("labels %v", s.Labels)
	}
	if got := s.Annotations[omniav1.AnnotationOIDCJWKSFetchedAt]; got != "2026-11-29T11:00:00Z" {
		t.Fatalf("fetched-at %q; want RFC 3339 in UTC", got)
	}
	if string(s.Data[JWKSKey]) != testKeySet || len(s.Data) != 1 {
		t.Fatalf("data %v", s.Data)
	}
}

// mirrorJWKS runs the key mirror's part of a pass on its own, through
// the reconciler's settle loop: the mirror Secret is read as the snapshot
// reads it, the plan's writes are made and the issuer is asked when the
// plan asks. It returns the mirror's timer, the status and the error.
func mirrorJWKS(t *testing.T, r *Reconciler, a *omniav1.AgentRuntime, now metav1.Time) (time.Duration, *omniav1.AgentRuntimeStatus, error) {
	t.Helper()
	ctx := context.Background()
	s := snapshot{in: Inputs{Agent: a}, now: now}
	s.live.jwks = read(ctx, r, a.Namespace, JWKSSecretName(a.Name), &corev1.Secret{})
	p, _, err := r.settle(ctx, s, func(s snapshot) plan {
		d := newDecider(&s)
		after, err := d.mirrorJWKS()
		d.end(d.st, after, err, nil)
		return d.p
	})
	if err != nil {
		t.Fatal(err)
	}
	return p.requeueAfter, p.status, p.err
}

// TestMirrorJWKSOutcomes checks the mirror's answers that need no control
// plane, on a fake API: what is a condition and a 6h wait, what is an
// error for backoff, and what is left alone.
func TestMirrorJWKSOutcomes(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := omniav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	t0 := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	failCreate := func(err error) interceptor.Funcs {
		return interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Secret); ok {
				return err
			}
			return c.Create(ctx, obj, opts...)
		}}
	}
	gr := schema.GroupResource{Resource: "secrets"}
	cases := []struct {
		name       string
		issuer     string // "" for the test issuer; "-" for an empty issuer
		existing   *corev1.Secret
		funcs      interceptor.Funcs
		wantAfter  time.Duration
		wantErr    bool
		wantReason string
		wantAsked  bool
	}{
		{name: "a refused write is SecretWriteFailed and waits for the refresh",
			funcs: failCreate(apierrors.NewForbidden(gr, "x", errors.New("rbac"))), wantAfter: JWKSRefresh,
			wantReason: omniav1.ReasonSecretWriteFailed, wantAsked: true},
		{name: "a transient write failure is SecretWriteFailed and returned for backoff",
			funcs: failCreate(apierrors.NewServiceUnavailable("busy")), wantErr: true,
			wantReason: omniav1.ReasonSecretWriteFailed, wantAsked: true},
		{name: "an empty issuer is MissingIssuer with no timer", issuer: "-",
			wantReason: omniav1.ReasonMissingIssuer},
		{name: "a Secret of that name not controlled by the agent is not overwritten",
			existing:  &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: JWKSSecretName("agent"), Namespace: "ns"}, Data: map[string][]byte{"k": []byte("v")}},
			wantAfter: JWKSRefresh, wantReason: omniav1.ReasonSecretWriteFailed},
		{name: "a working issuer and API mirror the key set",
			wantAfter: JWKSRefresh, wantReason: omniav1.ReasonJWKSUpdated, wantAsked: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := newTestIssuer(t)
			issuer := is.srv.URL
			if tc.issuer == "-" {
				issuer = ""
			}
			a := newAgent("ns", "agent", func(a *omniav1.AgentRuntime) {
				a.UID = "uid-1"
				a.Spec.ExternalAuth = &omniav1.ExternalAuthConfig{OIDC: &omniav1.OIDCAuth{Issuer: issuer, Audience: "agents"}}
			})
			b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(a).WithInterceptorFuncs(tc.funcs)
			if tc.existing != nil {
				b = b.WithObjects(tc.existing)
			}
			r := &Reconciler{Client: b.Build(), JWKSFetcher: &oidc.Fetcher{HTTP: is.srv.Client()}}
			after, st, err := mirrorJWKS(t, r, a, t0)
			if after != tc.wantAfter || (err != nil) != tc.wantErr {
				t.Fatalf("mirrorJWKS = %s, %v; want %s, error %v", after, err, tc.wantAfter, tc.wantErr)
			}
			c := meta.FindStatusCondition(st.Conditions, omniav1.ConditionOIDCJWKSReady)
			if c == nil || c.Reason != tc.wantReason {
				t.Fatalf("OIDCJWKSReady %+v; want %s", c, tc.wantReason)
			}
			if asked := is.discovered.Load() > 0; asked != tc.wantAsked {
				t.Fatalf("issuer asked: %v; want %v", asked, tc.wantAsked)
			}
			if tc.existing != nil {
				s := &corev1.Secret{}
				if err := r.Client.Get(context.Background(), client.ObjectKeyFromObject(tc.existing), s); err != nil || string(s.Data["k"]) != "v" || len(s.OwnerReferences) != 0 {
					t.Fatalf("foreign Secret changed: %+v, %v", s, err)
				}
			}
		})
	}
}
