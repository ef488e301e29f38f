// Package containers holds the fault suites: the project's own images run
// as Docker containers on a private network (tests/internal/containers),
// and each suite kills, stops, pauses or cuts off one of them mid-work and
// checks what the platform promises (docs/reliability.md). Run them with
// `make test-containers`; `make test` runs them at the size CI affords,
// `make chaos` (AGENTPLANE_CHAOS=1) at full size.
package containers

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/tests/internal/containers"
)

// images are the project's images the suites run.
var images = map[string]string{}

// full is true under `make chaos`: the suites run at their full size.
var full = os.Getenv("AGENTPLANE_CHAOS") != ""

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var refs []string
	for _, n := range []string{"nats", "supervisor", "mockagent", "agent-controller", "omnia-controllers", "realtime-gateway", "batch-poller", "fakevendor"} {
		ref, err := containers.Image(root, n)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		images[n] = ref
		refs = append(refs, ref)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := containers.RequireImages(ctx, refs...); err != nil {
		fmt.Fprintln(os.Stderr, "containers:", err)
		return 1
	}
	// The suites' clients log nothing of interest; controller-runtime
	// complains with a stack trace when no logger is set.
	ctrllog.SetLogger(logr.Discard())
	return m.Run()
}

// size is n in CI and fullN under `make chaos`.
func size[T any](n, fullN T) T {
	if full {
		return fullN
	}
	return n
}
