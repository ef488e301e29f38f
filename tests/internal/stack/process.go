package stack

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Process is a started binary whose output goes to a log file.
type Process struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

// StartProcess runs bin with args until ctx ends, appending its stdout and
// stderr to the file at logPath.
func StartProcess(ctx context.Context, logPath, bin string, args ...string) (*Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	p := &Process{cmd: cmd, log: f, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop ends the process with SIGINT, then SIGKILL after 10 seconds.
func (p *Process) Stop() { p.StopWithin(10 * time.Second) }

// StopWithin ends the process with SIGINT, then SIGKILL after grace.
func (p *Process) StopWithin(grace time.Duration) {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.log.Close()
}

// Kill ends the process at once, as a crash would.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
	_ = p.log.Close()
}

// FreeAddrs returns n loopback addresses free a moment ago, for the
// listeners of a process.
func FreeAddrs(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, l.Addr().String())
		_ = l.Close()
	}
	return addrs, nil
}

// WaitListening waits up to 30 seconds for p to accept connections on
// addr, and fails early when p exits.
func WaitListening(addr string, p *Process) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("exited before listening on %s", addr)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not listening on %s after 30s", addr)
}

// DumpLog prints the last n lines of the log at path to stderr, for a
// suite that failed.
func DumpLog(name, path string, n int) {
	if raw, err := os.ReadFile(path); err == nil {
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(os.Stderr, "--- %s log (tail)\n%s\n", name, strings.Join(lines, "\n"))
	}
}
