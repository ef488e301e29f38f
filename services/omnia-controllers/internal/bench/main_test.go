// Package bench measures the omnia-controllers binary on a control plane of
// its own (docs/benchmarks.md): the PromptPack workload run by the real
// process at its default settings, with its peak memory, CPU time and API
// requests read from outside it. It runs only under `make bench`
// (AGENTPLANE_BENCH=1) and reports figures, never asserting them.
package bench

import (
	"os"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/benchproc"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(benchproc.Main(m, &env, testenv.Options{}, built.Remove))
}
