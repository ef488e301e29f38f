package agentruntime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/tools/localnode/node"
)

// TestBench200AgentRuntimes is the AgentRuntime workload of
// docs/benchmarks.md: 200 AgentRuntimes (one mock Provider, one
// PromptPack) created at once, with the PromptPack, Provider and
// AgentRuntime controllers and a localnode running in this process, so
// the Deployments' pods really run (as host processes) and really pass
// their readiness probe. It reports the
// time until every agent is Running, the rate, and the AgentRuntime
// reconciles per agent; it asserts none of them. AGENTPLANE_BENCH_N
// changes the count.
//
//	sudo AGENTPLANE_BENCH=1 go test -count=1 -run '^TestBench200AgentRuntimes$' -v ./internal/agentruntime/
func TestBench200AgentRuntimes(t *testing.T) {
	if os.Getenv("AGENTPLANE_BENCH") == "" {
		t.Skip("benchmark: run with `make bench` (AGENTPLANE_BENCH=1)")
	}
	if os.Geteuid() != 0 {
		t.Skip("benchmark: localnode needs root (containers run in private mount namespaces)")
	}
	n := 200
	if v, err := strconv.Atoi(os.Getenv("AGENTPLANE_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	serveReadyz(t)
	ln, err := node.Start(context.Background(), node.Config{
		RESTConfig: env.Config, Name: "localnode", StateDir: t.TempDir(), MaxPods: n + 20,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		t.Fatalf("start localnode: %v", err)
	}
	// Cleanups run in reverse: the manager stops, the namespace goes, then
	// the node kills the pods' processes.
	t.Cleanup(ln.Stop)
	ns := env.Namespace(t)
	counter := startAllWith(t, Config{RuntimeImage: "agentplane/stand-in-runtime:bench", RuntimeCommand: []string{"/bin/sleep", "3600"},
		FacadeImage: "agentplane/stand-in-runtime:bench", FacadeCommand: []string{"/bin/sleep", "3600"}})
	createWithInputs(t, ns)

	ctx := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, 1)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := env.Client.Create(ctx, newAgent(ns, fmt.Sprintf("agent-%03d", i), nil)); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	created := time.Since(start)

	var first time.Duration
	for {
		var agents omniav1.AgentRuntimeList
		if err := env.Client.List(ctx, &agents, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, a := range agents.Items {
			if a.Status.Phase == omniav1.AgentRuntimePhaseRunning && a.Status.Replicas != nil && a.Status.Replicas.Ready > 0 {
				running++
			}
		}
		if running > 0 && first == 0 {
			first = time.Since(start)
		}
		if running == n {
			break
		}
		if time.Since(start) > 20*time.Minute {
			t.Fatalf("only %d of %d agents Running after %s", running, n, time.Since(start).Round(time.Second))
		}
		time.Sleep(250 * time.Millisecond)
	}
	converged := time.Since(start)
	total := counter.Total()
	// Let the queue drain (no pass for a full second), then count what came
	// after convergence.
	counter.Drain(time.Second)
	tail := counter.Total() - total
	report(t, "| omnia-controllers AgentRuntime | %d AgentRuntimes created at once, pods run by localnode | create %.1f s, first Running %.1f s, all Running %.1f s (%.1f agents/s), %.2f reconciles/agent, %d after |",
		n, created.Seconds(), first.Seconds(), converged.Seconds(), float64(n)/converged.Seconds(), float64(total)/float64(n), tail)
}

// serveReadyz answers the runtime containers' readiness probe. localnode
// runs every pod in the host network (pod IP 127.0.0.1), so the n stand-in
// runtimes cannot each bind the health port; one server in this process
// answers GET /readyz on it for all of them, and each container runs a
// command that just stays up.
func serveReadyz(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(HealthPort)))
	if err != nil {
		t.Fatalf("benchmark: the runtimes' health port must be free on 127.0.0.1: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	// The runtime containers' TCP probe needs only a listener.
	rl, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(RuntimePort)))
	if err != nil {
		t.Fatalf("benchmark: the runtimes' port must be free on 127.0.0.1: %v", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	for _, ln := range []net.Listener{l, rl} {
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("readyz server: %v", err)
			}
		}()
	}
	t.Cleanup(func() { _ = srv.Close() })
}

// report records one figure for docs/benchmarks.md.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.BenchReport(t, fmt.Sprintf(format, args...))
}
