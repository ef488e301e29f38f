package testenv

import (
	"net"
	"testing"
	"time"
)

// Eventually polls cond every 100 ms until it returns nil, and fails the
// test with what and cond's last error once within has passed. Tests wait
// on conditions, never on durations: within is only how long to give up
// after.
func Eventually(t testing.TB, within time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FreeAddr returns a loopback address no one listens on now, for a server
// the test starts by flags (so it cannot be handed a listener).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
