package node

import "time"

// SetTokenRefreshForTest makes projected tokens refresh d after issue
// instead of at 80% of their lifetime; the returned func restores it.
func SetTokenRefreshForTest(d time.Duration) func() {
	refreshAfter.Store(int64(d))
	return func() { refreshAfter.Store(0) }
}
