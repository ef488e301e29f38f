// Package auth answers who a caller is (Kubernetes TokenReview on the
// bearer token of the call, through libs/grpcauth) and whether they may
// prompt an Agent (SubjectAccessReview on the prompt subresource of
// agents).
package auth

import (
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/agentplane/agentplane/libs/grpcauth"
)

// maxCacheEntries bounds the Authorizer's cache as grpcauth bounds the
// Authenticator's: a flood of distinct callers cannot grow the gateway
// without limit.
const maxCacheEntries = grpcauth.MaxCacheEntries

// User is an authenticated caller as the apiserver knows them.
type User = grpcauth.User

// Authenticator turns the bearer token of a call into a User.
type Authenticator = grpcauth.Authenticator

// NewAuthenticator reviews tokens with kube for audiences and remembers an
// accepted one for ttl (0: never). Refused tokens are not remembered, so a
// token that just became valid works at once. A missing, malformed or
// refused token (one not issued for any of audiences, when there are some)
// is Unauthenticated, its message naming the audiences; an apiserver that
// cannot answer is Unavailable. Empty audiences accept the apiserver's own,
// i.e. plain API tokens.
func NewAuthenticator(kube kubernetes.Interface, ttl time.Duration, audiences []string) *Authenticator {
	return grpcauth.NewAuthenticator(kube, grpcauth.Options{TTL: ttl, Audiences: audiences})
}
