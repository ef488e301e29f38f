// Package auth answers who a caller is (Kubernetes TokenReview on the
// bearer token of the call) and whether they may prompt an Agent
// (SubjectAccessReview on the prompt subresource of agents).
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
)

// maxCacheEntries bounds each of the caches of apiserver answers, which
// spare a steady session an API round trip per prompt (as the apiserver's
// own webhook authenticator and authorizer cache theirs), so that a flood
// of distinct tokens cannot grow the gateway without limit. It is far
// more than the callers one gateway serves at once, and at a few hundred
// bytes an answer costs tens of MiB at most; past it the least recently
// used answer goes first, so a flood cannot push out the callers in use.
const maxCacheEntries = 50_000

// User is an authenticated caller as the apiserver knows them.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string]authnv1.ExtraValue
}

// Authenticator turns the bearer token of a call into a User.
type Authenticator struct {
	kube kubernetes.Interface
	ttl  time.Duration
	// cache holds accepted tokens' Users by the token's hash.
	cache *cache.LRUExpireCache
}

// NewAuthenticator reviews tokens with kube and remembers an accepted one
// for ttl (0: never). Refused tokens are not remembered, so a token that
// just became valid works at once.
func NewAuthenticator(kube kubernetes.Interface, ttl time.Duration) *Authenticator {
	return &Authenticator{kube: kube, ttl: ttl, cache: cache.NewLRUExpireCache(maxCacheEntries)}
}

// Authenticate reads `authorization: Bearer <token>` from ctx's incoming
// metadata and reviews it. A missing, malformed or refused token is
// Unauthenticated; an apiserver that cannot answer is Unavailable.
func (a *Authenticator) Authenticate(ctx context.Context) (User, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return User{}, status.Error(codes.Unauthenticated, "no bearer token: send metadata `authorization: Bearer <Kubernetes token>`")
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		return User{}, status.Error(codes.Unauthenticated, "malformed authorization metadata: want `Bearer <token>`")
	}
	// The cache key is a hash: the gateway never keeps callers' tokens.
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if u, ok := a.cache.Get(key); ok {
		return u.(User), nil
	}
	tr, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return User{}, status.Errorf(codes.Unavailable, "cannot review the bearer token: %v", err)
	}
	if !tr.Status.Authenticated {
		return User{}, status.Error(codes.Unauthenticated, "the bearer token was not accepted by Kubernetes")
	}
	ui := tr.Status.User
	u := User{Name: ui.Username, UID: ui.UID, Groups: ui.Groups, Extra: ui.Extra}
	if a.ttl > 0 {
		a.cache.Add(key, u, a.ttl)
	}
	return u, nil
}
