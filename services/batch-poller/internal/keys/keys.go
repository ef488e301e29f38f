// Package keys reads vendor API keys from each namespace's agent-secrets
// Secret through one informer on those Secrets across all namespaces, so
// polling thousands of batches costs no API-server reads.
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

// Source serves keys from the informer's cache.
type Source struct {
	kube    kubernetes.Interface
	factory informers.SharedInformerFactory
	synced  cache.InformerSynced
	lister  listersv1.SecretLister
}

// New builds the informer; Start runs it.
func New(kube kubernetes.Interface) *Source {
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			// Only the one Secret per namespace that holds run keys.
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", agentsv1alpha1.AgentSecretsName).String()
		}))
	inf := f.Core().V1().Secrets()
	s := &Source{kube: kube, factory: f, synced: inf.Informer().HasSynced, lister: inf.Lister()}
	return s
}

// Start runs the informer until ctx ends.
func (s *Source) Start(ctx context.Context) { s.factory.Start(ctx.Done()) }

// WaitForSync blocks until the cache holds the first full list, or timeout.
func (s *Source) WaitForSync(ctx context.Context, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return cache.WaitForCacheSync(ctx.Done(), s.synced)
}

// Synced reports whether the cache is ready; /readyz follows it.
func (s *Source) Synced() bool { return s.synced() }

// Key returns the value of key keyName in namespace's agent-secrets. A
// missing Secret or key is FailedPrecondition naming both, never a value.
// ctx bounds the live read that confirms a cache miss.
func (s *Source) Key(ctx context.Context, namespace, keyName string) (string, error) {
	if !s.synced() {
		return "", status.Error(codes.Unavailable, "API keys not loaded yet: the agent-secrets cache has not synced")
	}
	sec, err := s.lister.Secrets(namespace).Get(agentsv1alpha1.AgentSecretsName)
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
