package benchproc

import (
	"io"
	"net/http"
	"os"
	"os/exec"
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
	if p.pprofAddr == "" {
		return
	}
	resp, err := http.Get("http://" + p.pprofAddr + "/profile/heap")
	if err != nil {
		tb.Logf("heap profile: %v", err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(file, raw, 0o600)
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Logf("heap profile: %v (%s)", err, resp.Status)
	}
}
