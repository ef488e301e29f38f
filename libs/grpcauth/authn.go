// Package grpcauth authenticates gRPC callers by their Kubernetes token:
// the server reviews the `authorization: Bearer <token>` metadata of a call
// with a TokenReview (optionally for its own audiences) and remembers an
// accepted review briefly; the client sends a ServiceAccount token as
// per-RPC credentials, read from a projected token file or requested
// through the TokenRequest API. docs/security.md describes where it is used.
package grpcauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
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

// MaxCacheEntries bounds the cache of accepted reviews, which spares a
// steady caller an API round trip per call (as the apiserver's own webhook
// authenticator caches its answers), so that a flood of distinct tokens
// cannot grow the process without limit. Past it the least recently used
// answer goes first, so a flood cannot push out the callers in use.
const MaxCacheEntries = 50_000

// MetadataKey is the gRPC metadata key carrying the bearer token.
const MetadataKey = "authorization"

// User is an authenticated caller as the apiserver knows them.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string]authnv1.ExtraValue
}

// Options tune an Authenticator.
type Options struct {
	// TTL is how long an accepted token is remembered; 0 remembers none.
	// Refused tokens are never remembered, so a token that just became
	// valid works at once.
	TTL time.Duration
	// Audiences, when set, are asked of the TokenReview: a token is
	// accepted only when issued for one of them, so a token meant for
	// another service (or a plain API token) is refused. Empty accepts the
	// apiserver's own audiences.
	Audiences []string
	// Clock drives the cache's expiry; nil is the wall clock (tests step
	// a fake one).
	Clock cache.Clock
}

// Authenticator turns the bearer token of a call into a User.
type Authenticator struct {
	kube      kubernetes.Interface
	ttl       time.Duration
	audiences []string
	// cache holds accepted tokens' Users by the token's hash.
	cache *cache.LRUExpireCache
}

// NewAuthenticator reviews tokens with kube as opts say.
func NewAuthenticator(kube kubernetes.Interface, opts Options) *Authenticator {
	c := cache.NewLRUExpireCache(MaxCacheEntries)
	if opts.Clock != nil {
		c = cache.NewLRUExpireCacheWithClock(MaxCacheEntries, opts.Clock)
	}
	return &Authenticator{kube: kube, ttl: opts.TTL, audiences: slices.Clone(opts.Audiences), cache: c}
}

// BearerToken reads `authorization: Bearer <token>` from ctx's incoming
// metadata. A missing or malformed one is Unauthenticated.
func BearerToken(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(MetadataKey)
	if len(vals) == 0 {
		return "", status.Error(codes.Unauthenticated, "no bearer token: send metadata `authorization: Bearer <Kubernetes token>`")
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", status.Error(codes.Unauthenticated, "malformed authorization metadata: want `Bearer <token>`")
	}
	return token, nil
}

// Authenticate reviews the bearer token of ctx's call. A missing,
// malformed or refused token (one without the audience included) is
// Unauthenticated; an apiserver that cannot answer is Unavailable.
func (a *Authenticator) Authenticate(ctx context.Context) (User, error) {
	token, err := BearerToken(ctx)
	if err != nil {
		return User{}, err
	}
	// The cache key is a hash: the process never keeps callers' tokens.
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if u, ok := a.cache.Get(key); ok {
		return u.(User), nil
	}
	tr, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: a.audiences}}, metav1.CreateOptions{})
	if err != nil {
		return User{}, status.Errorf(codes.Unavailable, "cannot review the bearer token: %v", err)
	}
	if !tr.Status.Authenticated {
		return User{}, status.Error(codes.Unauthenticated, "the bearer token was not accepted by Kubernetes"+a.wantAudience())
	}
	if !a.audienceOK(tr.Status.Audiences) {
		// An authenticator that ignores spec.audiences answers without
		// them; such a token is not known to be meant for this service.
		return User{}, status.Error(codes.Unauthenticated, "the bearer token was not issued for this service's audience"+a.wantAudience())
	}
	ui := tr.Status.User
	u := User{Name: ui.Username, UID: ui.UID, Groups: ui.Groups, Extra: ui.Extra}
	if a.ttl > 0 {
		a.cache.Add(key, u, a.ttl)
	}
	return u, nil
}

// wantAudience tells a refused caller which audience its token needs, so
// that one who sent a plain API token learns what to ask for instead; ""
// when the Authenticator asks for none.
func (a *Authenticator) wantAudience() string {
	if len(a.audiences) == 0 {
		return ""
	}
	return fmt.Sprintf(": a token issued for audience %s is expected (TokenRequest with that audience, as `kubectl create token --audience` does)",
		strings.Join(quoteAll(a.audiences), " or "))
}

// quoteAll quotes each of s.
func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = strconv.Quote(v)
	}
	return out
}

// audienceOK reports whether the review's audiences include one asked
// for, as the TokenReview API asks its clients to check.
func (a *Authenticator) audienceOK(got []string) bool {
	if len(a.audiences) == 0 {
		return true
	}
	for _, g := range got {
		if slices.Contains(a.audiences, g) {
			return true
		}
	}
	return false
}
