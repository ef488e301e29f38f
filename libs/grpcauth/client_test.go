package grpcauth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestFileTokenFollowsTheKubeletsRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	f := NewFileToken(path)
	if _, err := f.GetRequestMetadata(t.Context()); status.Code(err) != codes.Unavailable {
		t.Fatalf("missing file: err = %v, want Unavailable (worth a retry)", err)
	}
	// The kubelet's atomic writer: a data directory per version, and the
	// token a symlink through ..data, swapped in one rename.
	write := func(version, token string) {
		t.Helper()
		vdir := filepath.Join(dir, version)
		if err := os.Mkdir(vdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(vdir, "token"), []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(version, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join("..data", "token"), path); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, version, token string }{
		{"the first token is read", "v1", "first"},
		{"a rotated token is read again", "v2", "second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write(tc.version, tc.token)
			for range 2 {
				md, err := f.GetRequestMetadata(t.Context())
				if err != nil || md["authorization"] != "Bearer "+tc.token {
					t.Fatalf("metadata = %v, %v", md, err)
				}
			}
		})
	}
	if f.RequireTransportSecurity() {
		t.Error("plaintext channels must be allowed")
	}
}

// tokenAPI answers TokenRequests with numbered tokens valid for the asked
// lifetime from now(), or fails while failing is set.
type tokenAPI struct {
	kube     *fake.Clientset
	now      func() time.Time
	n        atomic.Int32
	failing  atomic.Bool
	audience atomic.Value
}

func newTokenAPI(now func() time.Time) *tokenAPI {
	a := &tokenAPI{kube: fake.NewClientset(), now: now}
	a.kube.PrependReactor("create", "serviceaccounts", func(act k8stesting.Action) (bool, runtime.Object, error) {
		if act.GetSubresource() != "token" {
			return false, nil, nil
		}
		if a.failing.Load() {
			return true, nil, errors.New("apiserver away")
		}
		tr := act.(k8stesting.CreateAction).GetObject().(*authnv1.TokenRequest).DeepCopy()
		a.audience.Store(tr.Spec.Audiences)
		n := a.n.Add(1)
		tr.Status = authnv1.TokenRequestStatus{Token: fmt.Sprintf("tok-%d", n),
			ExpirationTimestamp: metav1.NewTime(a.now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))}
		return true, tr, nil
	})
	return a
}

func TestRequestedTokenIsRenewedBeforeItExpires(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	api := newTokenAPI(clock)
	r := NewRequestedToken(api.kube, "sys", "agent-controller", "batch", time.Hour)
	r.now = clock
	token := func() string {
		t.Helper()
		tok, err := r.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	steps := []struct {
		name    string
		advance time.Duration
		fail    bool
		want    string
	}{
		{"the first call requests a token", 0, false, "tok-1"},
		{"before 80% of its life the token is reused", 47 * time.Minute, false, "tok-1"},
		{"past 80% of its life a new token is requested", 2 * time.Minute, false, "tok-2"},
		{"a failed renewal keeps the unexpired token", 50 * time.Minute, true, "tok-2"},
		{"the renewal is tried again on the next call", time.Minute, false, "tok-3"},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		api.failing.Store(s.fail)
		if got := token(); got != s.want {
			t.Fatalf("%s: token %q, want %q", s.name, got, s.want)
		}
	}
	if aud, _ := api.audience.Load().([]string); len(aud) != 1 || aud[0] != "batch" {
		t.Errorf("audiences asked %v, want [batch]", aud)
	}
	now = now.Add(2 * time.Hour)
	api.failing.Store(true)
	if _, err := r.Token(context.Background()); status.Code(err) != codes.Unavailable {
		t.Errorf("expired token and no renewal: err = %v, want Unavailable", err)
	}
}

func TestParseServiceAccount(t *testing.T) {
	cases := []struct {
		name, in string
		ok       bool
	}{
		{"namespace/name is accepted", "agentplane-system/agent-controller", true},
		{"a bare name is refused", "agent-controller", false},
		{"an empty namespace is refused", "/agent-controller", false},
		{"an empty name is refused", "agentplane-system/", false},
		{"a third part is refused", "a/b/c", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns, name, err := ParseServiceAccount(tc.in)
			if (err == nil) != tc.ok || (tc.ok && ns+"/"+name != tc.in) {
				t.Errorf("ParseServiceAccount(%q) = %q %q %v", tc.in, ns, name, err)
			}
		})
	}
}
