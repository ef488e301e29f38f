package containers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tests/internal/containers"
)

// The batch suite: agent-controller submits batch runs through two
// batch-poller replicas to fakevendor, all in containers. batch-poller is
// restarted (one replica at a time with SIGTERM while the runs are being
// submitted, then both killed at once with every batch in flight), then
// fakevendor is cut off from it, and more runs are submitted while it is.
// Every run must end Succeeded with one vendor batch of its own, and no
// batch's notice may be published twice (docs/reliability.md).

// batchCaller is the ServiceAccount agent-controller calls batch-poller as.
const batchCaller = "agentplane-system/agent-controller"

// vendorCreate is fakevendor's route of an Anthropic batch create: each
// call that reached it is one vendor submit.
const vendorCreate = "POST /v1/messages/batches"

// batchBed is the platform with fakevendor and two batch-poller replicas.
type batchBed struct {
	*platform
	vendor  *containers.Container
	pollers []*containers.Container
}

// startBatchBed brings the platform, fakevendor (batches end delay after
// their create) and the batch-poller replicas up, for the Agents of ns.
func startBatchBed(t *testing.T, ns string, delay time.Duration) *batchBed {
	t.Helper()
	p := startPlatform(t, platformOptions{replicas: 1, poll: 2 * time.Second, controllerArgs: []string{
		"--batch-enabled", "--batch-poller-address=batch-poller:9090", "--batch-poll-seconds=2",
		"--batch-poller-service-account=" + batchCaller, "--nats-url=nats://nats:4222",
	}})
	b := &batchBed{platform: p}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agentplane-system"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "agentplane-system", Name: "agent-controller"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: agentsv1alpha1.AgentSecretsName, Namespace: ns},
			StringData: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test"}},
	} {
		if err := p.cl.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	b.vendor = p.net.Start(containers.Spec{
		Alias: "fakevendor", Image: images["fakevendor"], Cmd: []string{"--addr=:8089", "--polls=1", "--delay=" + delay.String()},
		Ports: []string{"8089/tcp"},
	})
	for i := range 2 {
		b.pollers = append(b.pollers, b.startPoller(t, i, ns))
	}
	for _, c := range b.pollers {
		waitReady(t, c)
	}
	return b
}

// startPoller starts batch-poller replica i. Both answer to the alias
// batch-poller, as a Service's pods do; agent-controller's one
// connection goes to one of them and moves when that one is gone.
func (b *batchBed) startPoller(t *testing.T, i int, ns string) *containers.Container {
	t.Helper()
	return b.net.Start(containers.Spec{
		Alias: "batch-poller", Image: images["batch-poller"], Files: b.kube.PKIFiles,
		Cmd: []string{
			"--kubeconfig=/pki/kubeconfig", "--pod-name=batch-poller-" + strconv.Itoa(i),
			"--nats-url=nats://nats:4222", "--batch-poll-seconds=1", "--batch-poll-backoff-max=8s",
			"--anthropic-base-url=http://fakevendor:8089", "--secret-namespaces=" + ns,
			"--allowed-callers=system:serviceaccount:agentplane-system:agent-controller",
			"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081",
		},
		Ports: []string{"8080/tcp", "8081/tcp"},
	})
}

// waitReady waits for a batch-poller's /readyz (its Secret cache synced).
func waitReady(t *testing.T, c *containers.Container) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + c.HostAddr("8081/tcp") + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after a minute: %v\n%s", c.Alias(), err, c.Output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// vendorSubmits is how many batch creates reached fakevendor.
func (b *batchBed) vendorSubmits(t *testing.T) int {
	t.Helper()
	resp, err := http.Get("http://" + b.vendor.HostAddr("8089/tcp") + "/_fakevendor/calls")
	if err != nil {
		t.Fatalf("fakevendor's counters: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		Routes map[string]int `json:"routes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Routes[vendorCreate]
}

// batchRecipe creates the batch AgentDefinition and Station name in ns.
func (b *batchBed) batchRecipe(t *testing.T, ns, name string) {
	t.Helper()
	def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-sonnet-4-5", Prompt: "Summarise {topic} in one line.",
			Execution: agentsv1alpha1.ExecutionBatch, Batch: &agentsv1alpha1.BatchSpec{MaxTokens: 256, TimeoutMinutes: 30}}}
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		// Every Agent is kept: the suite checks each one at the end.
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: name, DeadlineMinutes: 30,
			SuccessfulRunsHistoryLimit: ptr.To[int32](100000), FailedRunsHistoryLimit: ptr.To[int32](100000),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: images["mockagent"]}}}}}}
	for _, o := range []client.Object{def, st} {
		if err := b.cl.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// launchBatch creates the Agents names of station, with a parameter
// each, and returns the first error.
func (b *batchBed) launchBatch(ctx context.Context, ns, station string, names []string) error {
	for _, n := range names {
		a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns},
			Spec: agentsv1alpha1.AgentSpec{StationRef: station, Parameters: map[string]string{"topic": n}}}
		if err := b.cl.Create(ctx, a); err != nil {
			return fmt.Errorf("create Agent %s: %w", n, err)
		}
	}
	return nil
}

// notices counts the completion notices of each batch on NATS.
type notices struct {
	mu      sync.Mutex
	byBatch map[string]int
}

func (n *notices) seen(ev *eventsv1.RunEvent) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.byBatch[ev.GetBatch().GetBatchId()]++
}

// counts returns the number of notices and of batches noticed twice or more.
func (n *notices) counts() (total, repeated int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.byBatch {
		total += c
		if c > 1 {
			repeated++
		}
	}
	return total, repeated
}

func submitted(_ *snapshot, a agentsv1alpha1.Agent) bool { return a.Status.BatchID != "" }

func succeeded(_ *snapshot, a agentsv1alpha1.Agent) bool {
	return a.Status.Phase == agentsv1alpha1.PhaseSucceeded
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

func TestBatchPollerRestartedAndCutOffSubmitsEachRunOnce(t *testing.T) {
	n := size(150, 1000)  // runs in flight through the restarts
	late := size(30, 200) // runs created while fakevendor is cut off
	cut := size(15*time.Second, 60*time.Second)
	delay := size(50*time.Second, 300*time.Second) // a batch's time at the vendor
	const ns = "batch-faults"
	start := time.Now()
	b := startBatchBed(t, ns, delay)
	b.batchRecipe(t, ns, "summary")

	var seen = &notices{byBatch: map[string]int{}}
	sub, err := events.SubscribeBatchNotices(b.js.Conn(), ns, "", seen.seen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	// 1. Restarts while the runs are being submitted: a rolling restart
	// (each replica in turn stops with SIGTERM, its calls in flight
	// finish, and starts again), then both replicas killed at once.
	launched := make(chan error, 1)
	go func() { launched <- b.launchBatch(t.Context(), ns, "summary", names("run", n)) }()
	for i, c := range b.pollers {
		b.waitAtLeast(t, ns, (i+1)*n/4, 5*time.Minute, "submitted", submitted)
		stop := 10 * time.Second
		if err := c.Stop(t.Context(), &stop); err != nil {
			t.Fatalf("stop %s: %v", c.Alias(), err)
		}
		c.Restart()
		waitReady(t, c)
	}
	b.waitAtLeast(t, ns, 3*n/4, 5*time.Minute, "submitted", submitted)
	b.killAll(t)
	if err := <-launched; err != nil {
		t.Fatal(err)
	}
	b.waitAll(t, ns, n, 5*time.Minute, "submitted", submitted)
	// What the restarted replicas answered from the table: the Submits
	// retried after the kill whose batch the killed process had sent.
	existing, takeovers := b.pollerMetric(t, "batch_poller_submits_answered_from_state_total"), b.pollerMetric(t, "batch_poller_submit_takeovers_total")
	t.Logf("%d runs submitted through a rolling restart and a kill of both replicas in %s; %d vendor submits, "+
		"%.0f retried submits answered from the table, %.0f claims taken over",
		n, time.Since(start).Round(time.Second), b.vendorSubmits(t), existing, takeovers)

	// 2. Both replicas killed at once, every batch in flight at the vendor.
	b.killAll(t)
	t.Logf("both replicas killed and started again with %d batches in flight", n)

	// 3. fakevendor cut off from batch-poller; runs created meanwhile.
	b.vendor.Disconnect()
	cutAt := time.Now()
	if err := b.launchBatch(t.Context(), ns, "summary", names("late", late)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(cutAt.Add(cut)))
	b.vendor.Reconnect()
	healed := time.Now()
	t.Logf("fakevendor cut off for %s with %d more runs created", healed.Sub(cutAt).Round(time.Second), late)

	total := n + late
	last := b.waitAll(t, ns, total, delay+5*time.Minute, "Succeeded", succeeded)
	allDone := time.Since(healed)

	batches := map[string]string{}
	for name, a := range last.agents {
		if other, dup := batches[a.Status.BatchID]; dup {
			t.Errorf("Agents %s and %s share batch %s", name, other, a.Status.BatchID)
		}
		batches[a.Status.BatchID] = name
	}
	// A claim is taken over only from a process killed while it waited
	// for the vendor, which may or may not have made that batch: the one
	// second submit docs/batch-poller.md allows. Any other is a fault.
	takeovers += b.pollerMetric(t, "batch_poller_submit_takeovers_total")
	if got := b.vendorSubmits(t); got < total || float64(got) > float64(total)+takeovers {
		t.Errorf("fakevendor received %d batch creates for %d runs with %.0f claims taken over: a run was submitted twice", got, total, takeovers)
	}
	// Every notice is counted once it arrives; give the last a moment.
	time.Sleep(2 * time.Second)
	published, repeated := seen.counts()
	if repeated > 0 {
		t.Errorf("%d batches had their completion notice published more than once", repeated)
	}
	t.Logf("%d runs Succeeded, %d vendor submits, %d distinct batches, %.0f claims taken over in all; %d notices, %d repeated; "+
		"every run done %s after the partition healed, %.0f polls backed off during it; %s in all",
		len(last.agents), b.vendorSubmits(t), len(batches), takeovers, published, repeated, allDone.Round(time.Second),
		b.pollerMetric(t, "batch_poller_poll_backoffs_total"), time.Since(start).Round(time.Second))
}

// killAll kills every batch-poller replica at once (SIGKILL) and starts
// them again.
func (b *batchBed) killAll(t *testing.T) {
	t.Helper()
	for _, c := range b.pollers {
		c.Kill()
	}
	for _, c := range b.pollers {
		c.Restart()
	}
	for _, c := range b.pollers {
		waitReady(t, c)
	}
}

// pollerMetric sums a counter over the replicas (since each one's last
// start).
func (b *batchBed) pollerMetric(t *testing.T, name string) float64 {
	t.Helper()
	var sum float64
	for _, c := range b.pollers {
		sum += metric(t, c, name)
	}
	return sum
}
