// Package bench measures agent-controller against baselines taken in the
// same run on the same control plane (docs/benchmarks.md): the two-write
// ceiling of a plain client, and kube-controller-manager's Job controller at
// the same client rate limit. It runs only under `make bench`
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
	// The test's own controller-runtime clients log nothing worth reading.
	ctrllog.SetLogger(logr.Discard())
	if os.Getenv(testenv.BenchEnv) == "" {
		// Every test here skips itself: no control plane to start.
		os.Exit(m.Run())
	}
	// A control plane of its own, with the apiserver's defaults (watch
	// cache on) and no kube-controller-manager: the Job controller runs
	// only in the phase that measures it, so it never competes with the
	// others.
	code := testenv.Run(m, &env, testenv.Options{})
	if built.remove != nil {
		built.remove()
	}
	os.Exit(code)
}
