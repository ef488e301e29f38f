package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/service"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/benchproc"
	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
)

// The client rate limit of agent-controller (its defaults) and of
// kube-controller-manager in the phase that measures it: the same for
// both, so neither is held back where the other is not.
const (
	clientQPS   = 500
	clientBurst = 1000
)

// clients is how many goroutines create a burst, and how many the
// two-write ceiling uses: more than either controller has workers.
const clients = 16

func benchEnabled(t *testing.T) {
	if os.Getenv(testenv.BenchEnv) == "" {
		t.Skip("benchmark: run with `make bench` (AGENTPLANE_BENCH=1)")
	}
}

// benchN is the burst size: AGENTPLANE_BENCH_N, 1,000 by default.
func benchN() int {
	if n, err := strconv.Atoi(os.Getenv("AGENTPLANE_BENCH_N")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// report records one figure (a docs/benchmarks.md table row).
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.BenchReport(t, fmt.Sprintf(format, args...))
}

// unthrottled returns a controller-runtime client and a clientset with no
// client-side rate limit, so the test's own load never waits on one.
func unthrottled(t *testing.T) (client.Client, kubernetes.Interface) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, kube
}

// mkStation creates an unlimited Station and its AgentDefinition.
func mkStation(t *testing.T, c client.Client, ns string) (*agentsv1alpha1.Station, *agentsv1alpha1.AgentDefinition) {
	t.Helper()
	def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "st-def", Namespace: ns},
		Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "do {thing}"}}
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: "st", Namespace: ns},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: "st-def", DeadlineMinutes: 30,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "runner"}}}}}}
	for _, o := range []client.Object{def, st} {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	return st, def
}

func newAgent(ns, name string) *agentsv1alpha1.Agent {
	return &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentSpec{StationRef: "st", Parameters: map[string]string{"thing": name}}}
}

// binary is a running agent-controller process.
type binary struct {
	*benchproc.Process
	// memory says the memory limit it runs under, for the reports.
	memory string
}

// startBinary builds and runs the real agent-controller for one namespace,
// at clientQPS/clientBurst with its default workers. With
// AGENTPLANE_BENCH_PROFILE set it is built with the benchprofile tag, so
// CPUProfile can record its CPU profile into that file.
// AGENTPLANE_BENCH_BINARY runs a binary built earlier instead (one of
// another commit, to compare two in the same conditions), and
// AGENTPLANE_BENCH_ARGS adds flags (--workers=8, to compare settings)
// after the test's own args. AGENTPLANE_BENCH_MEMORY_LIMIT (a quantity,
// 128Mi) runs it as in a container with that memory limit: the service
// sets its Go soft limit to service.MemoryLimitRatio of the container's
// (libs/service.LimitMemory), and the bench sets GOMEMLIMIT to the same.
func startBinary(t *testing.T, ns string, args ...string) *binary {
	t.Helper()
	dir := t.TempDir()
	prof := os.Getenv("AGENTPLANE_BENCH_PROFILE")
	bin := os.Getenv("AGENTPLANE_BENCH_BINARY")
	if bin == "" {
		bin = buildBinary(t, prof != "")
	}
	kcPath := kubeconfig(t, dir, "agent-controller")
	cmd := exec.Command(bin, "--kubeconfig", kcPath, "--watch-namespace", ns, "--leader-elect=false",
		"--kube-api-qps", strconv.Itoa(clientQPS), "--kube-api-burst", strconv.Itoa(clientBurst),
		"--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0", "--log-level", "warn")
	// Extra flags, to compare settings (the last of a repeated flag wins).
	cmd.Args = append(cmd.Args, args...)
	cmd.Args = append(cmd.Args, strings.Fields(os.Getenv("AGENTPLANE_BENCH_ARGS"))...)
	cmd.Stderr = os.Stderr
	b := &binary{memory: "no memory limit"}
	cmd.Env = os.Environ()
	if limit, soft := memoryLimit(t); soft > 0 {
		cmd.Env = append(cmd.Env, "GOMEMLIMIT="+strconv.FormatInt(soft, 10))
		b.memory = fmt.Sprintf("as in a container limited to %s (GOMEMLIMIT %.0f MiB)", limit, float64(soft)/(1<<20))
	}
	if prof != "" {
		b.Process = benchproc.StartProfiled(t, cmd, prof)
	} else {
		b.Process = benchproc.Start(t, cmd)
	}
	return b
}

// memoryLimit returns AGENTPLANE_BENCH_MEMORY_LIMIT and the Go soft
// limit a container with that memory limit gives the service; 0 when
// unset.
func memoryLimit(t *testing.T) (string, int64) {
	t.Helper()
	v := os.Getenv("AGENTPLANE_BENCH_MEMORY_LIMIT")
	if v == "" {
		return "", 0
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Value() <= 0 {
		t.Fatalf("AGENTPLANE_BENCH_MEMORY_LIMIT=%q: want a memory quantity such as 128Mi (%v)", v, err)
	}
	return v, int64(float64(q.Value()) * service.MemoryLimitRatio)
}

// built is agent-controller of this tree, built once per test process, so
// every phase runs the same build; TestMain removes it.
var built = &benchproc.Binary{Pkg: "github.com/agentplane/agentplane/services/agent-controller"}

// buildBinary builds agent-controller from this tree (with the
// benchprofile tag when profiled) the first time it is asked for.
func buildBinary(t *testing.T, profiled bool) string {
	t.Helper()
	if profiled {
		return built.Path(t, "benchprofile")
	}
	return built.Path(t)
}

// kubeconfig writes a kubeconfig for a new system:masters user into dir.
func kubeconfig(t *testing.T, dir, user string) string {
	t.Helper()
	kc, err := env.KubeconfigFor(user)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, user+".kubeconfig")
	if err := os.WriteFile(p, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startKCM runs kube-controller-manager with only the Job controller and
// the ServiceAccount controller (pods are refused in a namespace without
// its default ServiceAccount), and the extra controllers named, at
// clientQPS/clientBurst and otherwise its defaults. stop ends it.
func startKCM(t *testing.T, extra ...string) (stop func()) {
	t.Helper()
	assets, err := kubeassets.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(assets, kubeassets.BinControllerManager),
		"--kubeconfig="+kubeconfig(t, dir, "kube-controller-manager"),
		"--secure-port=0", "--leader-elect=false", "--profiling=false",
		"--controllers="+strings.Join(append([]string{"job", "serviceaccount"}, extra...), ","),
		"--kube-api-qps="+strconv.Itoa(clientQPS), "--kube-api-burst="+strconv.Itoa(clientBurst))
	logFile, err := os.Create(filepath.Join(dir, "kcm.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = logFile.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

// parallel runs fn(i) for i in [0,n) on w goroutines and returns the wall
// time.
func parallel(n, w int, fn func(i int)) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return time.Since(start)
}

// pct returns the p-quantile of ds (sorted in place).
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[int(float64(len(ds)-1)*p)].Round(time.Millisecond)
}

// arrivals records when each named object was first seen.
type arrivals struct {
	mu   sync.Mutex
	at   map[string]time.Time
	want int
	all  chan struct{}
}

func newArrivals(want int) *arrivals {
	return &arrivals{at: map[string]time.Time{}, want: want, all: make(chan struct{})}
}

// seen records name's arrival; the want-th arrival closes all.
func (a *arrivals) seen(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.at[name]; ok {
		return
	}
	a.at[name] = time.Now()
	if len(a.at) == a.want {
		close(a.all)
	}
}

// wait waits for every arrival, failing the test after within.
func (a *arrivals) wait(t *testing.T, within time.Duration, what string) {
	t.Helper()
	select {
	case <-a.all:
	case <-time.After(within):
		a.mu.Lock()
		defer a.mu.Unlock()
		t.Fatalf("%s: %d of %d within %s", what, len(a.at), a.want, within)
	}
}

// added records, until w ends, the arrival of each object w reports
// Added, under the name name gives it.
func (a *arrivals) added(w watch.Interface, name func(metav1.Object) string) {
	for ev := range w.ResultChan() {
		if o, ok := ev.Object.(metav1.Object); ok && ev.Type == watch.Added {
			a.seen(name(o))
		}
	}
}

// span returns the first and the last arrival.
func (a *arrivals) span() (first, last time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, at := range a.at {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return first, last
}

// since returns, for each name in created, how long after its creation it
// arrived, and the last arrival.
func (a *arrivals) since(created map[string]time.Time) (lat []time.Duration, last time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, c := range created {
		if at, ok := a.at[name]; ok {
			lat = append(lat, at.Sub(c))
			if at.After(last) {
				last = at
			}
		}
	}
	return lat, last
}

// times is a copy of when each name arrived.
func (a *arrivals) times() map[string]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]time.Time, len(a.at))
	for name, at := range a.at {
		out[name] = at
	}
	return out
}

// count is how many names have arrived.
func (a *arrivals) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}
