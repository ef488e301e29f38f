package auth

import (
	"sync"
	"time"
)

// maxEntries bounds a cache so that a flood of distinct tokens cannot grow
// the gateway without limit; past it the cache starts over.
const maxEntries = 50_000

// ttlCache remembers answers of the Kubernetes API for a short while, as
// the apiserver's own webhook authenticator and authorizer do, so a steady
// session costs no API round trip per prompt.
type ttlCache[V any] struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[V any](now func() time.Time) *ttlCache[V] {
	return &ttlCache[V]{now: now, m: map[string]ttlEntry[V]{}}
}

func (c *ttlCache[V]) get(k string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !c.now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(k string, v V, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.m) >= maxEntries {
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxEntries {
			c.m = map[string]ttlEntry[V]{}
		}
	}
	c.m[k] = ttlEntry[V]{v: v, expires: now.Add(ttl)}
}
