package agentruntime

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/oidc"
)

// testIssuer is an OIDC issuer that counts discovery requests.
type testIssuer struct {
	srv        *httptest.Server
	discovered atomic.Int32
	broken     atomic.Bool // discovery answers 404
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	is := &testIssuer{}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case oidc.DiscoveryPath:
			is.discovered.Add(1)
			if is.broken.Load() {
				http.NotFound(w, r)
				return
			}
			_, _ = fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":%q}`, is.srv.URL, is.srv.URL+"/keys")
		case "/keys":
			_, _ = w.Write([]byte(testKeySet))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(is.srv.Close)
	return is
}

// oidcAgent starts the controllers against issuer and creates an agent
// that validates its tokens.
func oidcAgent(t *testing.T, ns string, clock *testClock, is *testIssuer) *results {
	t.Helper()
	res := startTimed(t, clock, func(r *Reconciler) { r.JWKSFetcher = &oidc.Fetcher{HTTP: is.srv.Client()} })
	createWithInputs(t, ns, newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.ExternalAuth = &omniav1.ExternalAuthConfig{OIDC: &omniav1.OIDCAuth{Issuer: is.srv.URL + "/", Audience: "agents"}}
	}))
	return res
}

// jwksCase is what every mirror test starts from: a namespace, the test's
// clock, an issuer, and the controllers running an agent against it.
type jwksCase struct {
	ns    string
	clock *testClock
	is    *testIssuer
	res   *results
}

// startJWKS starts a mirror test: brokenIssuer makes discovery fail;
// otherwise it waits until the mirror is settled.
func startJWKS(t *testing.T, brokenIssuer bool) jwksCase {
	t.Helper()
	c := jwksCase{ns: env.Namespace(t), clock: newTestClock(), is: newTestIssuer(t)}
	c.is.broken.Store(brokenIssuer)
	c.res = oidcAgent(t, c.ns, c.clock, c.is)
	if !brokenIssuer {
		settled(t, c.ns)
	}
	return c
}

// advance moves the clock by d and waits for the pass a poke brings. It
// returns how many discovery requests the issuer had answered before.
func (c jwksCase) advance(t *testing.T, d time.Duration) int32 {
	t.Helper()
	before := c.is.discovered.Load()
	c.clock.Set(c.clock.Now().Add(d))
	c.res.pokeAndWait(t, c.ns, "agent")
	return before
}

func jwksIs(ns string, status metav1.ConditionStatus, reason, msgPart string) func() error {
	return func() error {
		a, err := getAgent(ns, "agent")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(a.Status.Conditions, omniav1.ConditionOIDCJWKSReady)
		if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, msgPart) {
			return fmt.Errorf("OIDCJWKSReady %+v; want %s/%s with %q", c, status, reason, msgPart)
		}
		if strings.Contains(c.Message, `"kty"`) {
			return fmt.Errorf("condition quotes key material: %q", c.Message)
		}
		return nil
	}
}

// readMirror reads the agent's mirror Secret through the API server.
//
//nolint:contextcheck // test helper: it makes its own context.Background(), the only context the tests here have; callers have nothing cancellable to pass
func readMirror(ns string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	return s, env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: JWKSSecretName("agent")}, s)
}

func mirror(t *testing.T, ns string) *corev1.Secret {
	t.Helper()
	s, err := readMirror(ns)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// settled waits until a pass has served the mirror from its Secret, so
// later counts of issuer requests are not disturbed by the first writes.
func settled(t *testing.T, ns string) {
	t.Helper()
	ctrltest.Eventually(t, wait, jwksIs(ns, metav1.ConditionTrue, omniav1.ReasonJWKSUpdated, "(cached)"))
}

// TestJWKSMirrorWritesSecret: the key set is mirrored into a Secret the
// agent controls, labelled and stamped with its fetch time, and the only
// timer is the 6h refresh.
func TestJWKSMirrorWritesSecret(t *testing.T) {
	c := startJWKS(t, false)
	s := mirror(t, c.ns)
	if !metav1.IsControlledBy(s, mustAgent(t, c.ns, "agent")) {
		t.Fatalf("mirror not controlled by the agent: %+v", s.OwnerReferences)
	}
	if s.Annotations[omniav1.AnnotationOIDCJWKSFetchedAt] != c.clock.Now().Format(time.RFC3339) {
		t.Fatalf("fetched-at %q; want the clock's %s", s.Annotations[omniav1.AnnotationOIDCJWKSFetchedAt], c.clock.Now().Format(time.RFC3339))
	}
	if s.Labels[omniav1.LabelCredentialKind] != omniav1.CredentialKindOIDCJWKS || string(s.Data[JWKSKey]) != testKeySet {
		t.Fatalf("mirror labels %v data %q", s.Labels, s.Data[JWKSKey])
	}
	ctrltest.Eventually(t, wait, c.res.requeueIs(c.ns, "agent", JWKSRefresh))
}

// TestJWKSMirrorCachedNotRefetched: within 6h of the fetch the mirror is
// served from the Secret, the issuer is not asked, and the timer is the
// rest of the 6h.
func TestJWKSMirrorCachedNotRefetched(t *testing.T) {
	c := startJWKS(t, false)
	before := c.advance(t, 5*time.Hour)
	ctrltest.Eventually(t, wait, c.res.requeueIs(c.ns, "agent", time.Hour))
	if n := c.is.discovered.Load(); n != before {
		t.Fatalf("issuer asked %d more time(s) for a fresh mirror", n-before)
	}
}

// TestJWKSMirrorRefetchedAfter6h: once the mirror is 6h old the next pass
// asks the issuer again and restamps the Secret.
func TestJWKSMirrorRefetchedAfter6h(t *testing.T) {
	c := startJWKS(t, false)
	before := c.advance(t, JWKSRefresh+time.Second)
	ctrltest.Eventually(t, wait, func() error {
		if n := c.is.discovered.Load(); n <= before {
			return fmt.Errorf("issuer not asked again (%d requests)", n)
		}
		if got := mirror(t, c.ns).Annotations[omniav1.AnnotationOIDCJWKSFetchedAt]; got != c.clock.Now().Format(time.RFC3339) {
			return fmt.Errorf("fetched-at %q not restamped", got)
		}
		return nil
	})
	ctrltest.Eventually(t, wait, c.res.requeueIs(c.ns, "agent", JWKSRefresh))
}

// TestJWKSMirrorDiscoveryFailure: an issuer that fails discovery is
// recorded as DiscoveryFailed naming what failed, with no Secret, and is
// asked again only at the 6h timer.
func TestJWKSMirrorDiscoveryFailure(t *testing.T) {
	c := startJWKS(t, true)
	ctrltest.Eventually(t, wait, jwksIs(c.ns, metav1.ConditionFalse, omniav1.ReasonDiscoveryFailed, "openid-configuration: status 404"))
	ctrltest.Eventually(t, wait, c.res.requeueIs(c.ns, "agent", JWKSRefresh))
	if _, err := readMirror(c.ns); !apierrors.IsNotFound(err) {
		t.Fatalf("mirror Secret after a failed discovery: %v", err)
	}
}

// TestJWKSMirrorRemovedWithOIDC: removing spec.externalAuth.oidc deletes
// the mirror and its condition, and leaves no timer.
func TestJWKSMirrorRemovedWithOIDC(t *testing.T) {
	c := startJWKS(t, false)
	update(t, &omniav1.AgentRuntime{}, c.ns, "agent", func(o client.Object) { o.(*omniav1.AgentRuntime).Spec.ExternalAuth = nil })
	ctrltest.Eventually(t, wait, func() error {
		_, err := readMirror(c.ns)
		if err := ctrltest.Gone("mirror", err); err != nil {
			return err
		}
		a, err := getAgent(c.ns, "agent")
		if err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(a.Status.Conditions, omniav1.ConditionOIDCJWKSReady); cond != nil {
			return fmt.Errorf("OIDCJWKSReady still reported: %+v", cond)
		}
		return nil
	})
	ctrltest.Eventually(t, wait, c.res.requeueIs(c.ns, "agent", 0))
}

// TestJWKSMirrorRepairedByWatch: the mirror is owned by the agent, so
// deleting it brings the agent back at once through the watch; nothing
// waits for the 6-hour timer.
func TestJWKSMirrorRepairedByWatch(t *testing.T) {
	c := startJWKS(t, false)
	if err := env.Client.Delete(context.Background(), mirror(t, c.ns)); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, func() error {
		s, err := readMirror(c.ns)
		if err != nil {
			return err
		}
		if string(s.Data[JWKSKey]) != testKeySet {
			return fmt.Errorf("mirror data %q", s.Data[JWKSKey])
		}
		return nil
	})
}
