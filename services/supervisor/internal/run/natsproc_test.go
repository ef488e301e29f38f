package run

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/testbin"
)

// natsServerBin is nats-server built once per test binary, for the
// benchmarks that publish to a server in its own process.
var natsServerBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "supervisor-bench-nats")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "nats-server")
	return bin, testbin.Build([]string{"build", "-o", bin, "github.com/nats-io/nats-server/v2"})
})

// startNATSProcess runs nats-server with JetStream as its own process on
// a free loopback port and returns its URL once it accepts connections.
// Its CPU is then not this process's: a benchmark's CPU time is the
// supervisor's alone.
func startNATSProcess(tb testing.TB) string {
	tb.Helper()
	bin, err := natsServerBin()
	if err != nil {
		tb.Fatal(err)
	}
	// A port the kernel just handed out and took back: free, as far as
	// loopback goes.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "-js", "-sd", tb.TempDir(), "-a", host, "-p", port)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nats-server on %s not ready: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "nats://" + net.JoinHostPort(host, port)
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
