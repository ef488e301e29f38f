// Package key keeps the shared realtime key (Secret agentplane-realtime-key,
// entry key) current in memory by watching the Secret, so a rotation takes
// effect without a restart. The key is never logged.
package key

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/agentplane/agentplane/libs/realtime"
)

// Source holds the current key.
type Source struct {
	key    atomic.Pointer[[]byte]
	synced atomic.Bool
}

// Static is a Source that always holds k, for tests and benchmarks.
func Static(k []byte) *Source {
	s := &Source{}
	s.key.Store(&k)
	s.synced.Store(true)
	return s
}

// Watch starts following the key Secret in namespace until ctx ends. A
// missing Secret or a key too short for realtime.CheckKey leaves the
// Source without a key (and logs why, never the value).
func Watch(ctx context.Context, kube kubernetes.Interface, namespace string, log *slog.Logger) *Source {
	s := &Source{}
	// Only the one Secret: the gateway's Role grants nothing else.
	lw := cache.NewListWatchFromClient(kube.CoreV1().RESTClient(), "secrets", namespace,
		fields.OneTermEqualSelector("metadata.name", realtime.KeySecretName))
	set := func(obj any) {
		sec, ok := obj.(*corev1.Secret)
		if !ok {
			return
		}
		k := sec.Data[realtime.KeySecretKey]
		if err := realtime.CheckKey(k); err != nil {
			log.Error("realtime key unusable; prompts fail until it is fixed", "secret", namespace+"/"+realtime.KeySecretName, "err", err)
			s.key.Store(nil)
			return
		}
		k = append([]byte(nil), k...)
		if old := s.key.Load(); old == nil || string(*old) != string(k) {
			log.Info("realtime key loaded", "secret", namespace+"/"+realtime.KeySecretName, "resourceVersion", sec.ResourceVersion)
		}
		s.key.Store(&k)
	}
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: &corev1.Secret{}, ResyncPeriod: 10 * time.Minute,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    set,
			UpdateFunc: func(_, obj any) { set(obj) },
			DeleteFunc: func(any) {
				log.Error("realtime key Secret deleted; prompts fail until it is back", "secret", namespace+"/"+realtime.KeySecretName)
				s.key.Store(nil)
			},
		},
	})
	go ctrl.RunWithContext(ctx)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), ctrl.HasSynced) {
			s.synced.Store(true)
		}
	}()
	return s
}

// Key returns the current key, or nil when there is none.
func (s *Source) Key() []byte {
	if k := s.key.Load(); k != nil {
		return *k
	}
	return nil
}

// Ready reports whether the Secret was read and holds a usable key.
func (s *Source) Ready() bool { return s.synced.Load() && s.Key() != nil }
