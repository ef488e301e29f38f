// Package benchproc runs a service's real binary for a benchmark and reads
// what it costs: its resident memory and CPU time from /proc, and the API
// server's requests from apiserver_request_total. The benchmarks of every
// controller measure a binary the same way (docs/benchmarks.md).
package benchproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Build compiles the Go package pkg (an import path) with the build tags
// given into a binary in a new temporary directory, and returns its path
// and a function that removes the directory.
func Build(pkg string, tags ...string) (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "agentplane-bench-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { _ = os.RemoveAll(dir) }
	path = filepath.Join(dir, filepath.Base(pkg))
	args := []string{"build", "-o", path}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, pkg)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return path, remove, nil
}

// Binary is a Go package's binary, built the first time a test of the
// process asks for it, so every test and phase runs the same build. The
// benchmark's TestMain removes it (Remove) after the tests.
type Binary struct {
	// Pkg is the import path of the main package.
	Pkg    string
	once   sync.Once
	path   string
	remove func()
	err    error
}

// Path builds the binary on the first call, with the build tags of that
// call, and returns its path; a failed build fails tb, on every call.
func (b *Binary) Path(tb testing.TB, tags ...string) string {
	tb.Helper()
	b.once.Do(func() { b.path, b.remove, b.err = Build(b.Pkg, tags...) })
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// Remove deletes the binary, if one was built.
func (b *Binary) Remove() {
	if b.remove != nil {
		b.remove()
	}
}

// Process is a running binary under measurement.
type Process struct {
	// Pid is the process's ID.
	Pid       int
	cmd       *exec.Cmd
	once      sync.Once
	pprofAddr string
}

// Start runs cmd (its Stderr as the caller set it) and stops it when the
// test ends.
func Start(tb testing.TB, cmd *exec.Cmd) *Process {
	tb.Helper()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", cmd.Path, err)
	}
	p := &Process{Pid: cmd.Process.Pid, cmd: cmd}
	tb.Cleanup(p.Stop)
	return p
}

// Stop kills the process and waits for it; later calls do nothing, so a
// test may end it before a phase that must run without it.
func (p *Process) Stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
}

// RSSMiB is the process's resident set size now, in MiB; 0 once it has
// gone.
func (p *Process) RSSMiB() float64 { return statusMiB(p.Pid, "VmRSS:") }

// PeakRSSMiB is the highest resident set size the process has had
// (VmHWM), in MiB; 0 once it has gone.
func (p *Process) PeakRSSMiB() float64 { return statusMiB(p.Pid, "VmHWM:") }

// RSSFileMiB is the part of the resident set that maps files (RssFile:
// the binary's own pages, shared with any other process running it), in
// MiB; the rest is the process's own memory (RssAnon, heap and stacks).
func (p *Process) RSSFileMiB() float64 { return statusMiB(p.Pid, "RssFile:") }

// statusMiB reads one kB field of /proc/<pid>/status, in MiB.
func statusMiB(pid int, field string) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(raw), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// CPU is the user and system CPU time the process has used, from
// /proc/<pid>/stat.
func (p *Process) CPU(tb testing.TB) time.Duration {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid))
	if err != nil {
		tb.Fatal(err)
	}
	d, err := parseCPU(raw)
	if err != nil {
		tb.Fatalf("/proc/%d/stat: %v", p.Pid, err)
	}
	return d
}

// parseCPU reads utime and stime (fields 14 and 15, in clock ticks of
// 1/100 s, the kernel's USER_HZ on Linux) from a /proc/<pid>/stat line.
func parseCPU(raw []byte) (time.Duration, error) {
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after it start past its last closing parenthesis.
	end := strings.LastIndexByte(string(raw), ')')
	if end < 0 {
		return 0, fmt.Errorf("no command name in %q", raw)
	}
	f := strings.Fields(string(raw[end+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	utime, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}
