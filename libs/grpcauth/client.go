package grpcauth

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The client side: per-RPC credentials carrying a ServiceAccount token.
// Both report RequireTransportSecurity false, so they also work on a
// plaintext channel: the token is audience-bound and short-lived, and
// keeping it off other pods' wire is the NetworkPolicy's (or a mesh's)
// job, as docs/security.md says.

// ServiceAccountUsername is the username Kubernetes gives the
// ServiceAccount namespace/name in a TokenReview.
func ServiceAccountUsername(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// bearer is the metadata of one call.
func bearer(token string) map[string]string {
	return map[string]string{MetadataKey: "Bearer " + token}
}

// FileToken sends the token held in a file, such as a projected
// ServiceAccount token volume. The kubelet rewrites that file before the
// token expires, so the file is looked at on every call and read again
// whenever it changed.
type FileToken struct {
	path string

	mu    sync.Mutex
	seen  os.FileInfo
	token string
}

var _ credentials.PerRPCCredentials = (*FileToken)(nil)

// NewFileToken reads the token from path on first use.
func NewFileToken(path string) *FileToken { return &FileToken{path: path} }

// Token returns the file's token, read again when the file changed. A
// file that cannot be read or is empty is Unavailable: the kubelet may
// not have written it yet, so the call is worth a retry.
func (f *FileToken) Token() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		return "", status.Errorf(codes.Unavailable, "token file: %v", err)
	}
	// The kubelet swaps a symlink to a new file; a plain rewrite changes
	// the time or size.
	if f.seen != nil && os.SameFile(fi, f.seen) && fi.ModTime().Equal(f.seen.ModTime()) && fi.Size() == f.seen.Size() {
		return f.token, nil
	}
	raw, err := os.ReadFile(f.path)
	if err != nil {
		return "", status.Errorf(codes.Unavailable, "token file: %v", err)
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		return "", status.Errorf(codes.Unavailable, "token file %s is empty", f.path)
	}
	f.seen, f.token = fi, tok
	return tok, nil
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (f *FileToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	tok, err := f.Token()
	if err != nil {
		return nil, err
	}
	return bearer(tok), nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: the
// channel may be plaintext (see the note at the top of this file).
func (*FileToken) RequireTransportSecurity() bool { return false }

// RequestedToken sends a token of a ServiceAccount obtained through the
// TokenRequest API, for a process that runs outside a pod with a
// kubeconfig allowed to create serviceaccounts/token. The token is renewed
// once 80% of its lifetime has passed, as the kubelet does for a projected
// one.
type RequestedToken struct {
	kube            kubernetes.Interface
	namespace, name string
	audiences       []string
	lifetime        time.Duration
	now             func() time.Time

	mu      sync.Mutex
	token   string
	renewAt time.Time
	expires time.Time
}

var _ credentials.PerRPCCredentials = (*RequestedToken)(nil)

// requestTimeout bounds one TokenRequest.
const requestTimeout = 10 * time.Second

// NewRequestedToken asks kube for tokens of the ServiceAccount
// namespace/name, issued for audience ("" for the apiserver's own) and
// valid for lifetime (the apiserver's minimum is ten minutes).
func NewRequestedToken(kube kubernetes.Interface, namespace, name, audience string, lifetime time.Duration) *RequestedToken {
	r := &RequestedToken{kube: kube, namespace: namespace, name: name, lifetime: lifetime, now: time.Now}
	if audience != "" {
		r.audiences = []string{audience}
	}
	return r
}

// Token returns a token that has not reached its renewal time, asking for
// a new one otherwise. When the request fails, a token that has not
// expired yet is still used; without one the error is Unavailable.
func (r *RequestedToken) Token(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if r.token != "" && now.Before(r.renewAt) {
		return r.token, nil
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	secs := int64(r.lifetime / time.Second)
	tr, err := r.kube.CoreV1().ServiceAccounts(r.namespace).CreateToken(ctx, r.name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: r.audiences, ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		if r.token != "" && now.Before(r.expires) {
			return r.token, nil
		}
		return "", status.Errorf(codes.Unavailable, "request a token of ServiceAccount %s/%s: %v", r.namespace, r.name, err)
	}
	if tr.Status.Token == "" {
		return "", status.Errorf(codes.Unavailable, "request a token of ServiceAccount %s/%s: empty answer", r.namespace, r.name)
	}
	expires := tr.Status.ExpirationTimestamp.Time
	if !expires.After(now) {
		expires = now.Add(r.lifetime)
	}
	r.token, r.expires = tr.Status.Token, expires
	r.renewAt = now.Add(expires.Sub(now) * 8 / 10)
	return r.token, nil
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (r *RequestedToken) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	tok, err := r.Token(ctx)
	if err != nil {
		return nil, err
	}
	return bearer(tok), nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: the
// channel may be plaintext (see the note at the top of this file).
func (*RequestedToken) RequireTransportSecurity() bool { return false }

// ParseServiceAccount splits "namespace/name".
func ParseServiceAccount(s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q is not a ServiceAccount as namespace/name", s)
	}
	return namespace, name, nil
}
