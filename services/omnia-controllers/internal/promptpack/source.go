package promptpack

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Source is what a pass learns from the ConfigMap a pack names. It
// depends on the ConfigMap's content alone, so it holds for as long as the
// ConfigMap keeps its resourceVersion (sourceMemo).
type Source struct {
	// Found is whether the ConfigMap exists.
	Found bool
	// HasKey is whether its data has pack.json.
	HasKey bool
	// Digest is pack.json's ContentDigest; "" without pack.json.
	Digest string
	// SchemaErr says why pack.json fails the schema; "" when it conforms.
	SchemaErr string
	// Tools are the keys of pack.json's top-level tools object, when it
	// conforms.
	Tools map[string]bool
}

// ReadSource judges a ConfigMap (nil: it does not exist) as a pack's
// source: the digest of its pack.json, the schema's verdict, and the
// tools it declares.
func ReadSource(cm *corev1.ConfigMap, v Validator) Source {
	if cm == nil {
		return Source{}
	}
	content, ok := cm.Data[omniav1.PackJSONKey]
	if !ok {
		return Source{Found: true}
	}
	s := Source{Found: true, HasKey: true, Digest: ContentDigest(content)}
	if err := v.Validate([]byte(content)); err != nil {
		s.SchemaErr = err.Error()
		return s
	}
	s.Tools = declaredTools(content)
	return s
}

// memoSize and memoTTL bound what sourceMemo keeps: a Source per
// ConfigMap read lately, a few hundred bytes each.
const (
	memoSize = 4096
	memoTTL  = time.Hour
)

// sourceMemo keeps the Source of each ConfigMap a pass read, with the
// ConfigMap's UID and resourceVersion, so a later pass for an unchanged
// ConfigMap (a sibling's phase changed, an agent started tracking the
// pack) reads its metadata from the cache instead of its data from the
// API server. A ConfigMap's edit changes its resourceVersion, and its
// watch event brings the pass that reads it again.
type sourceMemo struct {
	// meta reads a ConfigMap's metadata from the controller's metadata
	// informer.
	meta  client.Reader
	cache *utilcache.LRUExpireCache
}

type memoEntry struct {
	uid types.UID
	rv  string
	src Source
}

func newSourceMemo(meta client.Reader) *sourceMemo {
	return &sourceMemo{meta: meta, cache: utilcache.NewLRUExpireCache(memoSize)}
}

// read returns the Source of ConfigMap key: the memo's while the cached
// metadata shows the same UID and resourceVersion, else one read live
// through live and judged by v. A nil memo always reads live.
func (m *sourceMemo) read(ctx context.Context, live client.Reader, key types.NamespacedName, v Validator) (Source, error) {
	if m != nil {
		if got, ok := m.cache.Get(key); ok {
			e := got.(memoEntry)
			pm := &metav1.PartialObjectMetadata{}
			pm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			if err := m.meta.Get(ctx, key, pm); err == nil && pm.UID == e.uid && pm.ResourceVersion == e.rv {
				return e.src, nil
			}
		}
	}
	cm, err := kubeutil.Lookup[corev1.ConfigMap](ctx, live, key)
	if err != nil {
		return Source{}, err
	}
	src := ReadSource(cm, v)
	switch {
	case m == nil:
	case cm == nil:
		m.cache.Remove(key)
	default:
		m.cache.Add(key, memoEntry{uid: cm.UID, rv: cm.ResourceVersion, src: src}, memoTTL)
	}
	return src, nil
}
