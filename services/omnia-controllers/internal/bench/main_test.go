// Package bench measures the omnia-controllers binary on a control plane of
// its own (docs/benchmarks.md): the PromptPack workload run by the real
// process at its default settings, with its peak memory, CPU time and API
// requests read from outside it. It runs only under `make bench`
// (AGENTPLANE_BENCH=1) and reports figures, never asserting them.
package bench

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentplane/agentplane/libs/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	if os.Getenv(testenv.BenchEnv) == "" {
		// Every test here skips itself: no control plane to start.
		os.Exit(m.Run())
	}
	code := testenv.Run(m, &env, testenv.Options{})
	if built.remove != nil {
		built.remove()
	}
	os.Exit(code)
}
