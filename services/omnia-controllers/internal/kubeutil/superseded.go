package kubeutil

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Superseded remembers, per object, the resourceVersions a controller's
// own writes replaced. The informer cache delivers a write some time after
// the API server accepted it, and other events (an owned Deployment's
// status) can bring the object's next pass before that: the pass then
// reads the object as it was before the write and would act on it again
// — take a rollout step already taken, scale back what was just scaled.
// A pass that reads a superseded version knows the cache is behind and
// waits for the watch event that carries the write
// (docs/omnia-controllers.md, "Reads that lag the controller's writes").
//
// The zero value is ready to use; it is safe for concurrent use.
type Superseded struct {
	mu  sync.Mutex
	rvs map[types.NamespacedName]map[string]struct{}
}

// Wrote records a write that succeeded: before is the resourceVersion
// obj had when it was sent, and obj carries the one the API server gave
// it. A write that changed nothing keeps its resourceVersion and
// supersedes nothing.
func (s *Superseded) Wrote(obj client.Object, before string) {
	if before == "" || obj.GetResourceVersion() == before {
		return
	}
	key := client.ObjectKeyFromObject(obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rvs == nil {
		s.rvs = map[types.NamespacedName]map[string]struct{}{}
	}
	if s.rvs[key] == nil {
		s.rvs[key] = map[string]struct{}{}
	}
	s.rvs[key][before] = struct{}{}
}

// Stale reports whether obj, as read, is a version this controller's
// writes already replaced. A read of any other version shows the cache
// has caught up with every write recorded (resourceVersions are unique
// per object), so they are forgotten.
func (s *Superseded) Stale(obj client.Object) bool {
	key := client.ObjectKeyFromObject(obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	set, ok := s.rvs[key]
	if !ok {
		return false
	}
	if _, stale := set[obj.GetResourceVersion()]; stale {
		return true
	}
	delete(s.rvs, key)
	return false
}

// Forget drops what is recorded for an object that is gone.
func (s *Superseded) Forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rvs, key)
}
