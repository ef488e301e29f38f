package ctrltest

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Gate is a stand-in reconciler that holds every pass for Hold and records
// how many passes ran at once, in total and per object. Handed to a
// controller's SetupWithManager in place of the real reconciler, it shows
// the worker count the controller was wired with, whatever the real
// reconciler would do.
type Gate struct {
	// Hold is how long each pass blocks.
	Hold time.Duration

	mu       sync.Mutex
	inFlight int
	max      int
	passes   int
	perKey   map[types.NamespacedName]int
	overlap  bool
}

// Reconcile counts the pass, blocks for Hold and returns success.
func (g *Gate) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	g.mu.Lock()
	if g.perKey == nil {
		g.perKey = map[types.NamespacedName]int{}
	}
	g.inFlight++
	g.passes++
	g.max = max(g.max, g.inFlight)
	g.perKey[req.NamespacedName]++
	if g.perKey[req.NamespacedName] > 1 {
		g.overlap = true
	}
	g.mu.Unlock()
	select {
	case <-time.After(g.Hold):
	case <-ctx.Done():
	}
	g.mu.Lock()
	g.inFlight--
	g.perKey[req.NamespacedName]--
	g.mu.Unlock()
	return reconcile.Result{}, nil
}

// Stats returns the passes started, the most that ran at once, and whether
// one object was ever reconciled by two workers at the same time.
func (g *Gate) Stats() (passes, maxInFlight int, sameObjectTwice bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.passes, g.max, g.overlap
}
