package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/benchproc"
)

// built is omnia-controllers of this tree, built once per test process.
var built = &benchproc.Binary{Pkg: "github.com/agentplane/agentplane/services/omnia-controllers/cmd/omnia-controllers"}

// startBinary runs omnia-controllers at its default client limits and
// workers, without leader election (so it writes no Lease), and returns
// once it reports ready
// (its caches synced). AGENTPLANE_BENCH_BINARY runs a binary built
// earlier instead (another commit's, to compare two in the same
// conditions) and AGENTPLANE_BENCH_ARGS adds flags after the test's own.
// With AGENTPLANE_BENCH_PROFILE=<file> the binary is built with the
// benchprofile tag and profiled: the CPU profile into that file, heap
// profiles beside it.
func startBinary(t *testing.T) *binary {
	t.Helper()
	prof := os.Getenv("AGENTPLANE_BENCH_PROFILE")
	bin := os.Getenv("AGENTPLANE_BENCH_BINARY")
	if bin == "" {
		var tags []string
		if prof != "" {
			tags = append(tags, "benchprofile")
		}
		bin = built.Path(t, tags...)
	}
	kc, err := env.KubeconfigFor("omnia-controllers")
	if err != nil {
		t.Fatal(err)
	}
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	probes, metrics := testenv.FreeAddr(t), testenv.FreeAddr(t)
	cmd := exec.Command(bin, "--kubeconfig", kcPath, "--leader-elect=false", "--provider-credential-probe=false",
		"--metrics-bind-address", metrics, "--health-probe-bind-address", probes, "--log-level", "warn")
	cmd.Args = append(cmd.Args, strings.Fields(os.Getenv("AGENTPLANE_BENCH_ARGS"))...)
	cmd.Stderr = os.Stderr
	var p *benchproc.Process
	if prof != "" {
		p = benchproc.StartProfiled(t, cmd, prof)
	} else {
		p = benchproc.Start(t, cmd)
	}
	benchproc.WaitReady(t, probes, time.Minute)
	return &binary{Process: p, metrics: metrics}
}

// binary is a running omnia-controllers.
type binary struct {
	*benchproc.Process
	metrics string
}

// requests is what the binary has asked of the API server so far, by
// HTTP method.
func (b *binary) requests(t *testing.T) benchproc.Requests {
	t.Helper()
	return benchproc.ClientRequests(t, b.metrics)
}
