// Package ctxtime holds waits that end early when their context does.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends; it reports whether the full wait
// happened (a retry loop stops when it did not). A wait of d <= 0 returns
// at once, true unless ctx has already ended.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
