package benchproc

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentplane/agentplane/libs/testenv"
)

// Main runs a benchmark package's tests, for its TestMain: under `make
// bench` (AGENTPLANE_BENCH set) on a control plane of its own started
// with opts into *env, and otherwise without one, where every test skips
// itself. after, when not nil, runs once the tests end (to remove a
// binary built for them). The tests' own controller-runtime clients log
// nothing.
func Main(m *testing.M, env **testenv.Env, opts testenv.Options, after func()) int {
	ctrllog.SetLogger(logr.Discard())
	if os.Getenv(testenv.BenchEnv) == "" {
		return m.Run()
	}
	code := testenv.Run(m, env, opts)
	if after != nil {
		after()
	}
	return code
}

// WaitReady polls http://addr/readyz until it answers 200 OK, and fails tb
// after within.
func WaitReady(tb testing.TB, addr string, within time.Duration) {
	tb.Helper()
	testenv.Eventually(tb, within, "wait for "+addr+"/readyz", func() error {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	})
}
