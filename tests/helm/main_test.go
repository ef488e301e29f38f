package helm

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv"
)

// The control plane is started on first use, so that the tests that only
// render need no kube-apiserver.
var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

// cluster returns the package's control plane (kube-apiserver and etcd with
// the repository's CRDs), starting it on first use.
func cluster(t testing.TB) *testenv.Env {
	t.Helper()
	envOnce.Do(func() { env, envErr = testenv.Start(context.Background(), testenv.Options{}) })
	if envErr != nil {
		t.Fatalf("control plane: %v", envErr)
	}
	return env
}

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stop: %v\n", err)
		}
	}
	if builtDir != "" {
		_ = os.RemoveAll(builtDir)
	}
	os.Exit(code)
}
