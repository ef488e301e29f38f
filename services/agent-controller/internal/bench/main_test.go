// Package bench measures agent-controller against baselines taken in the
// same run on the same control plane (docs/benchmarks.md): the two-write
// ceiling of a plain client, and kube-controller-manager's Job controller at
// the same client rate limit. It runs only under `make bench`
// (AGENTPLANE_BENCH=1) and reports figures, never asserting them.
package bench

import (
	"os"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/benchproc"
)

var env *testenv.Env

// TestMain starts a control plane of its own, with the apiserver's
// defaults (watch cache on) and no kube-controller-manager: the Job
// controller runs only in the phase that measures it, so it never
// competes with the others.
func TestMain(m *testing.M) {
	os.Exit(benchproc.Main(m, &env, testenv.Options{}, built.Remove))
}
