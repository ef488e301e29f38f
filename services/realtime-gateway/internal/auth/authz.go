package auth

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// The access a caller needs, checked on the Agent by name so that a Role
// may also narrow it with resourceNames.
const (
	// Resource and Subresource name what is reviewed: agents/prompt.
	Resource    = "agents"
	Subresource = "prompt"
	// VerbCreate is needed by Prompt and Close, VerbGet by GetSession.
	VerbCreate = "create"
	VerbGet    = "get"
)

// Authorizer asks the apiserver whether a User may act on an Agent.
type Authorizer struct {
	kube              kubernetes.Interface
	allowTTL, denyTTL time.Duration
	// cache holds answers, allowed or not, by user, verb and Agent.
	cache *cache.LRUExpireCache
}

// NewAuthorizer reviews access with kube and remembers an allowed answer
// for allowTTL and a denied one for denyTTL (0: never).
func NewAuthorizer(kube kubernetes.Interface, allowTTL, denyTTL time.Duration) *Authorizer {
	return &Authorizer{kube: kube, allowTTL: allowTTL, denyTTL: denyTTL, cache: cache.NewLRUExpireCache(maxCacheEntries)}
}

// Authorize returns nil when u may verb the prompt subresource of the
// Agent namespace/name, PermissionDenied when not, and Unavailable when the
// apiserver cannot answer.
func (a *Authorizer) Authorize(ctx context.Context, u User, verb, namespace, name string) error {
	key := strings.Join([]string{u.Name, u.UID, strings.Join(u.Groups, ","), verb, namespace, name}, "\x00")
	v, ok := a.cache.Get(key)
	allowed, _ := v.(bool)
	if !ok {
		extra := map[string]authzv1.ExtraValue{}
		for k, v := range u.Extra {
			extra[k] = authzv1.ExtraValue(v)
		}
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Name, UID: u.UID, Groups: u.Groups, Extra: extra,
			ResourceAttributes: &authzv1.ResourceAttributes{
				Namespace: namespace, Verb: verb, Group: agentsv1alpha1.GroupVersion.Group,
				Resource: Resource, Subresource: Subresource, Name: name,
			},
		}}
		res, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return status.Errorf(codes.Unavailable, "cannot review access: %v", err)
		}
		allowed = res.Status.Allowed && !res.Status.Denied
		ttl := a.denyTTL
		if allowed {
			ttl = a.allowTTL
		}
		if ttl > 0 {
			a.cache.Add(key, allowed, ttl)
		}
	}
	if !allowed {
		return status.Errorf(codes.PermissionDenied, "%s may not %s agents/prompt of Agent %s/%s (needs verb %q on agents/prompt in group %s)",
			u.Name, verb, namespace, name, verb, agentsv1alpha1.GroupVersion.Group)
	}
	return nil
}
