package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LockRealtimePort takes the machine-wide lock on the port realtime run
// pods serve on: localnode runs pods in the host's network, so a realtime
// run's supervisor binds 127.0.0.1:8090, and two suites running realtime
// pods at once (go test runs packages in parallel) would collide. It
// blocks until the lock is free; the returned function releases it. The
// lock is an flock, so a suite that dies releases it with its process.
func LockRealtimePort() (func(), error) {
	path := filepath.Join(os.TempDir(), "agentplane-realtime-port.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("realtime port lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("realtime port lock: %w", err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
