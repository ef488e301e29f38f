package containers

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
	"github.com/agentplane/agentplane/tests/internal/containers"
	"github.com/agentplane/agentplane/tools/localnode/node"
	"github.com/nats-io/nats.go/jetstream"
)

// platform is what the suites of Agents need: the control plane, NATS and
// agent-controller replicas in containers, and localnode on the host
// running the run pods from the images (`make images`), as `make demo`
// does. The pods share the host's network: they reach NATS on its fixed
// loopback port.
type platform struct {
	net  *containers.Net
	kube *containers.ControlPlane
	cl   client.Client
	nats *containers.Container
	js   jetstream.JetStream
	// natsPort is NATS's port on the host's loopback.
	natsPort int
	// controllers are the agent-controller replicas, by alias.
	controllers []*containers.Container
	// poll is the controllers' --poll-interval.
	poll time.Duration
}

// platformOptions shape a platform.
type platformOptions struct {
	// replicas of agent-controller; with more than one they elect a leader.
	replicas int
	// poll is agent-controller's --poll-interval.
	poll time.Duration
	// controllerArgs are more agent-controller flags, such as the
	// realtime suite's --realtime-enabled; none by default.
	controllerArgs []string
}

// startPlatform brings a platform up; the test's cleanup takes it down.
func startPlatform(t *testing.T, o platformOptions) *platform {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := &platform{net: containers.NewNet(t), poll: o.poll}
	p.kube = containers.StartControlPlane(t, p.net, filepath.Join(root, "deploy", "crds"))
	scheme, err := testenv.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if p.cl, err = client.New(p.kube.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}

	natsData := t.TempDir()
	if err := os.Chmod(natsData, 0o777); err != nil { // the image's user writes it
		t.Fatal(err)
	}
	p.natsPort = containers.FreePort(t)
	p.nats = p.net.Start(containers.Spec{
		Alias: "nats", Image: images["nats"], FixedPorts: map[string]int{"4222/tcp": p.natsPort},
		Binds: []string{natsData + ":/data"},
	})
	p.js = connectJetStream(t, p.nats)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := events.EnsureStream(ctx, p.js, events.StreamConfig(0, 0, 0)); err != nil {
		t.Fatalf("create the event stream: %v", err)
	}

	// The node: run pods from the images, as the demo's node does.
	ln, err := node.Start(t.Context(), node.Config{
		RESTConfig: p.kube.Config, Name: "localnode", StateDir: t.TempDir(),
		// The apiserver, in its container, reads pod logs from it there.
		Address:   p.net.Gateway(),
		ImageDirs: []string{filepath.Join(kubeassets.CacheRoot(), "images")},
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		t.Fatalf("start localnode: %v", err)
	}
	t.Cleanup(ln.Stop)

	for i := range o.replicas {
		p.controllers = append(p.controllers, p.startController(t, fmt.Sprintf("agent-controller-%d", i), o))
	}
	return p
}

// controllerMemory is the agent-controller container's memory limit, the
// chart's default resources.limits.memory.
const controllerMemory = 256 << 20

// startController starts one agent-controller replica.
func (p *platform) startController(t *testing.T, alias string, o platformOptions) *containers.Container {
	t.Helper()
	args := []string{
		"--kubeconfig=/pki/kubeconfig", "--pod-name=" + alias, "--pod-namespace=default",
		"--poll-interval=" + o.poll.String(),
		"--nats-url=nats://127.0.0.1:" + strconv.Itoa(p.natsPort),
		"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081",
		"--leader-elect=" + strconv.FormatBool(o.replicas > 1),
	}
	args = append(args, o.controllerArgs...)
	return p.net.Start(containers.Spec{
		Alias: alias, Image: images["agent-controller"], Cmd: args,
		Files: p.kube.PKIFiles, Ports: []string{"8080/tcp"},
		Memory: controllerMemory,
	})
}

// station creates an AgentDefinition and a Station named name in ns whose
// runs are the mock CLI's slow run of steps events delay apart.
func (p *platform) station(t *testing.T, ns, name string, steps int, delay time.Duration) {
	t.Helper()
	def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-sonnet-4-5", Prompt: "count the steps", Resources: &agentsv1alpha1.AgentResources{
			Env: []agentsv1alpha1.EnvEntry{
				{Name: "MOCKAGENT_MODE", Value: "slow"}, {Name: "MOCKAGENT_STEPS", Value: strconv.Itoa(steps)},
				{Name: "MOCKAGENT_DELAY", Value: delay.String()},
			}}}}
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		// Every Agent is kept: the suites check each one at the end.
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: name, DeadlineMinutes: 10, SuccessfulRunsHistoryLimit: ptr.To[int32](100000),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: images["mockagent"]}}}}}}
	for _, o := range []client.Object{def, st} {
		if err := p.cl.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// namespace creates a namespace for the test's objects.
func (p *platform) namespace(t *testing.T, name string) string {
	t.Helper()
	if err := p.cl.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// launch creates the Agents names of station in ns.
func (p *platform) launch(t *testing.T, ns, station string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := p.create(t.Context(), ns, station, n); err != nil {
			t.Fatalf("create Agent %s: %v", n, err)
		}
	}
}

// create creates one Agent of station.
func (p *platform) create(ctx context.Context, ns, station, name string) error {
	a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentSpec{StationRef: station}}
	return p.cl.Create(ctx, a)
}

// snapshot is what the API server said of a namespace's Agents and Jobs
// at one moment.
type snapshot struct {
	at     time.Time
	agents map[string]agentsv1alpha1.Agent
	// jobs are the namespace's Jobs by the Agent that owns them.
	jobs map[string][]batchv1.Job
	// pods are the Jobs' pods by Agent.
	pods map[string][]corev1.Pod
}

// look lists ns's Agents and Jobs; an error (the API is away) is returned
// as is, for the caller to try again.
func (p *platform) look(ctx context.Context, ns string) (*snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var as agentsv1alpha1.AgentList
	if err := p.cl.List(ctx, &as, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var js batchv1.JobList
	if err := p.cl.List(ctx, &js, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var ps corev1.PodList
	if err := p.cl.List(ctx, &ps, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	s := &snapshot{at: time.Now(), agents: map[string]agentsv1alpha1.Agent{}, jobs: map[string][]batchv1.Job{}, pods: map[string][]corev1.Pod{}}
	for _, a := range as.Items {
		s.agents[a.Name] = a
	}
	agentOfJob := map[string]string{}
	for _, j := range js.Items {
		for _, o := range j.OwnerReferences {
			if o.Kind == "Agent" {
				s.jobs[o.Name] = append(s.jobs[o.Name], j)
				agentOfJob[j.Name] = o.Name
			}
		}
	}
	for _, pod := range ps.Items {
		if a, ok := agentOfJob[pod.Labels[batchv1.JobNameLabel]]; ok {
			s.pods[a] = append(s.pods[a], pod)
		}
	}
	return s, nil
}

// describe says where each Agent, its Jobs and their pods are, for a
// failure's message.
func (s *snapshot) describe() string {
	if s == nil {
		return "(the API never answered)"
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(s.agents)) {
		a := s.agents[name]
		fmt.Fprintf(&b, "  Agent %s: %s %s\n", name, a.Status.Phase, a.Status.FailureReason)
		for _, j := range s.jobs[name] {
			fmt.Fprintf(&b, "    Job %s: active %d, succeeded %d, failed %d, ended %v\n", j.Name, j.Status.Active, j.Status.Succeeded, j.Status.Failed, jobEnded(&j))
		}
		for _, pod := range s.pods[name] {
			fmt.Fprintf(&b, "    Pod %s on %q: %s", pod.Name, pod.Spec.NodeName, pod.Status.Phase)
			for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
				fmt.Fprintf(&b, " [%s %s]", cs.Name, containerState(cs.State))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// containerState is a container's state in a word or two.
func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("exited %d %s", s.Terminated.ExitCode, s.Terminated.Reason)
	case s.Waiting != nil:
		return "waiting " + s.Waiting.Reason + " " + s.Waiting.Message
	}
	return "unknown"
}

// jobEnded is when a Job reached Complete or Failed, by its condition;
// zero while it runs.
func jobEnded(j *batchv1.Job) time.Time {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// waitAll polls until every Agent of ns satisfies ok, failing the test
// after within; it returns the last snapshot.
func (p *platform) waitAll(t *testing.T, ns string, n int, within time.Duration, what string, ok func(*snapshot, agentsv1alpha1.Agent) bool) *snapshot {
	t.Helper()
	return p.waitFor(t, ns, within, what, ok, func(done, agents int) bool { return done == n && agents == n }, n)
}

// waitAtLeast polls until at least n Agents of ns satisfy ok, failing the
// test after within.
func (p *platform) waitAtLeast(t *testing.T, ns string, n int, within time.Duration, what string, ok func(*snapshot, agentsv1alpha1.Agent) bool) {
	t.Helper()
	p.waitFor(t, ns, within, what, ok, func(done, _ int) bool { return done >= n }, n)
}

// waitFor polls ns's Agents until enough(how many satisfy ok, how many
// there are) holds, failing the test after within; n is the count named
// in the failure.
func (p *platform) waitFor(t *testing.T, ns string, within time.Duration, what string, ok func(*snapshot, agentsv1alpha1.Agent) bool,
	enough func(done, agents int) bool, n int) *snapshot {
	t.Helper()
	deadline := time.Now().Add(within)
	var last *snapshot
	var lastErr error
	for {
		s, err := p.look(t.Context(), ns)
		if err == nil {
			last = s
			done := 0
			for _, a := range s.agents {
				if ok(s, a) {
					done++
				}
			}
			if enough(done, len(s.agents)) {
				return s
			}
			lastErr = fmt.Errorf("%d of %d", done, n)
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("Agents not %s after %s: %v\n%s", what, within, lastErr, last.describe())
			return last
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// metric reads one counter or gauge (the sum over its labels) from a
// container's /metrics on port 8080.
func metric(t *testing.T, c *containers.Container, name string) float64 {
	t.Helper()
	v, err := readMetric(c, name)
	if err != nil {
		t.Fatalf("%s's metrics: %v", c.Alias(), err)
	}
	return v
}

// metricOnceServed is metric for a container that may still be starting:
// it tries for up to a minute before failing the test.
func metricOnceServed(t *testing.T, c *containers.Container, name string) float64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := readMetric(c, name)
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's metrics: %v", c.Alias(), err)
		}
		time.Sleep(time.Second)
	}
}

// readMetric reads name from c's /metrics.
func readMetric(c *containers.Container, name string) (float64, error) {
	resp, err := http.Get("http://" + c.HostAddr("8080/tcp") + "/metrics")
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %s", resp.Status)
	}
	return sumMetric(resp.Body, name), nil
}

// sumMetric sums the samples of name in a Prometheus text exposition.
func sumMetric(r io.Reader, name string) float64 {
	var sum float64
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		metricName, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if base, _, _ := strings.Cut(metricName, "{"); base != name {
			continue
		}
		if v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}
