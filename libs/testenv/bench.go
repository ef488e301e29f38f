package testenv

import (
	"fmt"
	"os"
	"testing"
)

// BenchEnv names the variable that turns the benchmark tests on; `make
// bench` sets it. BenchOutEnv names the file the figures are appended to.
const (
	BenchEnv    = "AGENTPLANE_BENCH"
	BenchOutEnv = "AGENTPLANE_BENCH_OUT"
)

// BenchReport logs one benchmark figure (a docs/benchmarks.md table row)
// and appends it to the file named by AGENTPLANE_BENCH_OUT, where `make
// bench` collects every package's figures in one run.
func BenchReport(tb testing.TB, line string) {
	tb.Helper()
	tb.Log(line)
	p := os.Getenv(BenchOutEnv)
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		tb.Logf("bench report: %v", err)
		return
	}
	defer func() { _ = f.Close() }()
	_, _ = fmt.Fprintln(f, line)
}
