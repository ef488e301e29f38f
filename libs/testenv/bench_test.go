package testenv_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv"
)

func TestBenchReportAppendsToTheCollectedFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bench.md")
	t.Setenv(testenv.BenchOutEnv, out)
	testenv.BenchReport(t, "| a | 1 |")
	testenv.BenchReport(t, "| b | 2 |")
	raw, err := os.ReadFile(out)
	if err != nil || string(raw) != "| a | 1 |\n| b | 2 |\n" {
		t.Fatalf("got %q, %v", raw, err)
	}
}
