package benchproc

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/testenv"
)

// StartProfiled is Start for a binary built with -tags benchprofile
// (libs/benchprofile): it serves its profiles on a free loopback address,
// and CPUProfile records its CPU profile into cpuFile.
func StartProfiled(tb testing.TB, cmd *exec.Cmd, cpuFile string) *Process {
	tb.Helper()
	addr := testenv.FreeAddr(tb)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "AGENTPLANE_PPROF_ADDR="+addr, "AGENTPLANE_CPU_PROFILE="+cpuFile)
	p := Start(tb, cmd)
	p.pprofAddr = addr
	return p
}

// CPUProfile starts ("start") or stops ("stop") the CPU profile of a
// process started with StartProfiled; nothing for one started with Start.
func (p *Process) CPUProfile(tb testing.TB, what string) {
	tb.Helper()
	if p.pprofAddr == "" {
		return
	}
	var resp *http.Response
	var err error
	for range 50 { // the listener comes up with the process
		if resp, err = http.Get("http://" + p.pprofAddr + "/profile/" + what); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		tb.Fatalf("profile %s: %v", what, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("profile %s: %s", what, resp.Status)
	}
}

// HeapProfile writes the live heap profile of a process started with
// StartProfiled to file; nothing for one started with Start. A failure is
// logged, not fatal: the figures do not depend on it.
func (p *Process) HeapProfile(tb testing.TB, file string) {
	tb.Helper()
	p.saveProfile(tb, "heap", file)
}

// GoroutineProfile writes the goroutines of a process started with
// StartProfiled, grouped by stack as text, to file; as HeapProfile
// otherwise.
func (p *Process) GoroutineProfile(tb testing.TB, file string) {
	tb.Helper()
	p.saveProfile(tb, "goroutine", file)
}

// saveProfile writes what /profile/<name> answers to file.
func (p *Process) saveProfile(tb testing.TB, name, file string) {
	tb.Helper()
	if p.pprofAddr == "" {
		return
	}
	resp, err := http.Get("http://" + p.pprofAddr + "/profile/" + name)
	if err != nil {
		tb.Logf("%s profile: %v", name, err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(file, raw, 0o600)
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Logf("%s profile: %v (%s)", name, err, resp.Status)
	}
}

// MemoryClasses is the runtime's account of a process started with
// StartProfiled, as "class MiB" pairs (heap/objects 12.3, heap/free 1.0,
// ..., total, and the heap goal): what its anonymous resident memory is
// made of, and its number of goroutines. Empty for one started with Start or when it cannot be read.
func (p *Process) MemoryClasses(tb testing.TB) string {
	tb.Helper()
	if p.pprofAddr == "" {
		return ""
	}
	resp, err := http.Get("http://" + p.pprofAddr + "/profile/memory")
	if err != nil {
		tb.Logf("memory classes: %v", err)
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Logf("memory classes: %v (%s)", err, resp.Status)
		return ""
	}
	return formatMemoryClasses(string(raw))
}

// formatMemoryClasses turns the "name bytes" lines /profile/memory
// answers into one line of short names and MiB (goroutines counted).
func formatMemoryClasses(raw string) string {
	var out []string
	for l := range strings.SplitSeq(strings.TrimSpace(raw), "\n") {
		name, v, ok := strings.Cut(l, " ")
		b, err := strconv.ParseUint(v, 10, 64)
		if !ok || err != nil {
			continue
		}
		if count, ok := strings.CutSuffix(name, ":goroutines"); ok {
			out = append(out, fmt.Sprintf("%s %d", strings.TrimPrefix(count, "/sched/"), b))
			continue
		}
		name = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(name, "/memory/classes/"), "/gc/"), ":bytes")
		out = append(out, fmt.Sprintf("%s %.1f", name, float64(b)/(1<<20)))
	}
	return strings.Join(out, ", ")
}

// SampleMemoryPeak samples the resident set of a process started with
// StartProfiled every period and keeps its memory classes at the highest
// sample; stop ends the sampling and returns that sample's RSS and
// classes. For one started with Start, stop returns 0 and "".
func (p *Process) SampleMemoryPeak(tb testing.TB, every time.Duration) (stop func() (rssMiB float64, classes string)) {
	tb.Helper()
	if p.pprofAddr == "" {
		return func() (float64, string) { return 0, "" }
	}
	done, finished := make(chan struct{}), make(chan struct{})
	var peak float64
	var classes string
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if rss := p.RSSMiB(); rss > peak {
				peak, classes = rss, p.MemoryClasses(tb)
			}
		}
	}()
	var once sync.Once
	end := func() { once.Do(func() { close(done); <-finished }) }
	tb.Cleanup(end) // a test that ends early stops it too
	return func() (float64, string) {
		end()
		return peak, classes
	}
}
