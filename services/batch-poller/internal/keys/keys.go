// Package keys reads vendor API keys from each namespace's agent-secrets
// Secret through informers on those Secrets only (a field selector on
// metadata.name, which RBAC with resourceNames authorises), so polling
// thousands of batches costs no API-server reads: one informer per listed
// namespace, or one across all namespaces when none is listed.
package keys

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

// DefaultKeyName is the agent-secrets key of a provider's API key when the
// run names none: the variable the vendor's CLI reads.
func DefaultKeyName(p batchv1.Provider) string {
	switch p {
	case batchv1.Provider_PROVIDER_OPENAI:
		return "OPENAI_API_KEY"
	case batchv1.Provider_PROVIDER_GEMINI:
		return "GEMINI_API_KEY"
	}
	return "ANTHROPIC_API_KEY"
}

// Source serves keys from the informers' caches.
type Source struct {
	kube kubernetes.Interface
	// namespaces are the namespaces read; nil reads every namespace.
	namespaces map[string]bool
	factories  []informers.SharedInformerFactory
	synced     []cache.InformerSynced
	// listers are the informers' listers by namespace ("" for all).
	listers map[string]listersv1.SecretLister
}

// New builds the informers: one per namespace of namespaces, or one
// across every namespace when it is empty. Start runs them.
func New(kube kubernetes.Interface, namespaces ...string) *Source {
	s := &Source{kube: kube, listers: map[string]listersv1.SecretLister{}}
	scopes := []string{metav1.NamespaceAll}
	if len(namespaces) > 0 {
		s.namespaces, scopes = map[string]bool{}, nil
		for _, ns := range namespaces {
			if !s.namespaces[ns] {
				s.namespaces[ns] = true
				scopes = append(scopes, ns)
			}
		}
	}
	for _, ns := range scopes {
		f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				// Only the one Secret per namespace that holds run keys;
				// RBAC names it in resourceNames, which admits a list or
				// watch only with this selector.
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", agentsv1alpha1.AgentSecretsName).String()
			}))
		inf := f.Core().V1().Secrets()
		s.factories = append(s.factories, f)
		s.synced = append(s.synced, inf.Informer().HasSynced)
		s.listers[ns] = inf.Lister()
	}
	return s
}

// Start runs the informers until ctx ends.
func (s *Source) Start(ctx context.Context) {
	for _, f := range s.factories {
		f.Start(ctx.Done())
	}
}

// WaitForSync blocks until every cache holds its first full list, or
// timeout.
func (s *Source) WaitForSync(ctx context.Context, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return cache.WaitForCacheSync(ctx.Done(), s.synced...)
}

// Synced reports whether every cache is ready; /readyz follows it.
func (s *Source) Synced() bool {
	for _, ok := range s.synced {
		if !ok() {
			return false
		}
	}
	return true
}

// lister returns the lister serving namespace, nil when the namespace is
// not one batch-poller reads.
func (s *Source) lister(namespace string) listersv1.SecretLister {
	if s.namespaces == nil {
		return s.listers[metav1.NamespaceAll]
	}
	if !s.namespaces[namespace] {
		return nil
	}
	return s.listers[namespace]
}

// Key returns the value of key keyName in namespace's agent-secrets. A
// missing Secret or key is FailedPrecondition naming both, never a value.
// ctx bounds the live read that confirms a cache miss.
func (s *Source) Key(ctx context.Context, namespace, keyName string) (string, error) {
	lister := s.lister(namespace)
	if lister == nil {
		// Not read at all (nor allowed by RBAC): say so rather than ask.
		return "", status.Errorf(codes.FailedPrecondition,
			"namespace %q is not one batch-poller reads %q in (its --secret-namespaces)", namespace, agentsv1alpha1.AgentSecretsName)
	}
	if !s.Synced() {
		return "", status.Error(codes.Unavailable, "API keys not loaded yet: the agent-secrets cache has not synced")
	}
	sec, err := lister.Secrets(namespace).Get(agentsv1alpha1.AgentSecretsName)
	if apierrors.IsNotFound(err) || err == nil && len(sec.Data[keyName]) == 0 {
		// A Secret created or filled a moment ago may not have reached the
		// cache yet: confirm a miss with one live read before refusing.
		sec, err = s.live(ctx, namespace)
	}
	if apierrors.IsNotFound(err) {
		return "", status.Errorf(codes.FailedPrecondition,
			"namespace %q has no Secret %q (it must hold the vendor API key under key %q)",
			namespace, agentsv1alpha1.AgentSecretsName, keyName)
	}
	if err != nil {
		return "", status.Errorf(codes.Internal, "reading Secret %s/%s: %v", namespace, agentsv1alpha1.AgentSecretsName, err)
	}
	v, ok := sec.Data[keyName]
	if !ok || len(v) == 0 {
		return "", status.Errorf(codes.FailedPrecondition, "Secret %s/%s has no key %q (the vendor API key)",
			namespace, agentsv1alpha1.AgentSecretsName, keyName)
	}
	return string(v), nil
}

func (s *Source) live(ctx context.Context, namespace string) (*corev1.Secret, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return s.kube.CoreV1().Secrets(namespace).Get(ctx, agentsv1alpha1.AgentSecretsName, metav1.GetOptions{})
}

// Static is a fixed key table for tests and local runs: namespace → key
// name → value.
type Static map[string]map[string]string

// Key implements the same contract as Source.Key.
func (s Static) Key(_ context.Context, namespace, keyName string) (string, error) {
	ns, ok := s[namespace]
	if !ok {
		return "", status.Errorf(codes.FailedPrecondition, "namespace %q has no Secret %q", namespace, agentsv1alpha1.AgentSecretsName)
	}
	v, ok := ns[keyName]
	if !ok {
		return "", status.Errorf(codes.FailedPrecondition, "Secret %s/%s has no key %q", namespace, agentsv1alpha1.AgentSecretsName, keyName)
	}
	return v, nil
}
