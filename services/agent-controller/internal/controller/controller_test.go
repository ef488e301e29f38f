package controller

import (
	"context"
	"fmt"
	"net/http"

	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
	batchpb "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/eventpace"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// Without the watch cache a watch resumed from a compacted
	// resourceVersion gets 410 Gone straight from etcd, which is what the
	// re-list test needs to provoke.
	os.Exit(testenv.Run(m, &env, testenv.Options{ControllerManager: true, APIServerArgs: map[string]string{"watch-cache": "false"}}))
}

var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// start runs a controller for one namespace until the test ends.
func start(t *testing.T, ns string) (*Controller, *metrics.Metrics) {
	t.Helper()
	return startWith(t, ns, startOptions{})
}

// startOptions vary the controller a test runs.
type startOptions struct {
	// wrap, when set, stands between the controller's clientset (pods,
	// logs, Jobs) and the API server, to inject faults or serve what
	// envtest has no kubelet for.
	wrap func(http.RoundTripper) http.RoundTripper
	// record sends the controller's Events through client-go's
	// events.k8s.io/v1 broadcaster, as main does.
	record bool
	// batch, when set, enables batch runs with this batch-poller client.
	batch batchpb.BatchServiceClient
	// nats, when set, gives every run its own NATS credential, for a
	// server at testNATSURL.
	nats *NATSCredentials
}

// testNATSURL is the NATS server the runs of a controller started with
// startOptions.nats publish to; nothing listens there.
const testNATSURL = "nats://nats.invalid:4222"

// startWith runs a controller for one namespace, shaped by o, until the
// test ends.
func startWith(t *testing.T, ns string, o startOptions) (*Controller, *metrics.Metrics) {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	kube := env.Kube
	if o.wrap != nil {
		cfg := rest.CopyConfig(env.Config)
		cfg.Wrap(o.wrap)
		if kube, err = kubernetes.NewForConfig(cfg); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	opts := Options{Namespace: ns, PollInterval: 2 * time.Second, Log: quiet}
	if o.batch != nil {
		opts.Batch, opts.Reconcile.BatchEnabled = o.batch, true
	}
	if o.nats != nil {
		opts.NATS = o.nats
		opts.Reconcile.Job.NATSURL, opts.Reconcile.Job.NATSCredentials, opts.Reconcile.Job.NATSCA = testNATSURL, true, len(o.nats.CA) > 0
	}
	recording := make(chan struct{})
	if o.record {
		// The Recorder the binary uses, so the API server checks every
		// Event it writes.
		rec := eventpace.New(env.Kube.EventsV1(), env.Scheme, "agent-controller", quiet, nil)
		opts.Recorder = rec
		go func() { defer close(recording); rec.Run(ctx) }()
	} else {
		close(recording)
	}
	m := metrics.New()
	ctl := New(c, kube, m, opts)
	done := make(chan struct{})
	go func() { defer close(done); _ = ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; <-recording })
	return ctl, m
}

func mkStation(t *testing.T, ns, name string, mutate func(*agentsv1alpha1.StationSpec)) {
	t.Helper()
	def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name + "-def", Namespace: ns},
		Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "do {thing}"}}
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: name + "-def", DeadlineMinutes: 30,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "runner"}}}}}}
	if mutate != nil {
		mutate(&st.Spec)
	}
	for _, o := range []client.Object{def, st} {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func mkAgent(t *testing.T, ns, name, station string) {
	t.Helper()
	a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: agentsv1alpha1.AgentSpec{StationRef: station}}
	if err := env.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

func getAgent(t *testing.T, ns, name string) *agentsv1alpha1.Agent {
	t.Helper()
	a := &agentsv1alpha1.Agent{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, a); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return a
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitPhase(t *testing.T, ns, name string, phase agentsv1alpha1.AgentPhase) *agentsv1alpha1.Agent {
	t.Helper()
	var a *agentsv1alpha1.Agent
	eventually(t, name+" to be "+string(phase), func() bool {
		a = getAgent(t, ns, name)
		return a != nil && a.Status.Phase == phase
	})
	return a
}

// podOf waits for the pod of the Job called jobName and returns it.
func podOf(t *testing.T, ns, jobName string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, "the pod of "+jobName, func() bool {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + jobName})
		if err != nil || len(pods.Items) == 0 {
			return false
		}
		pod = &pods.Items[0]
		return true
	})
	return pod
}

// finishPod plays the kubelet's part: it ends the Job's pod with exit code
// code, and the real Job controller turns that into Complete or Failed.
func finishPod(t *testing.T, ns, jobName string, code int32) {
	t.Helper()
	finishPodWith(t, ns, jobName, code, "", "")
}

func TestMissingStationFailsTheAgent(t *testing.T) {
	ns := env.Namespace(t)
	start(t, ns)
	mkAgent(t, ns, "orphan", "nowhere")
	a := waitPhase(t, ns, "orphan", agentsv1alpha1.PhaseFailed)
	if !strings.Contains(a.Status.FailureReason, `Station "nowhere" not found`) || *a.Status.ExitCode != 1 {
		t.Fatalf("status %+v", a.Status)
	}
}

func TestARunGoesPendingRunningSucceeded(t *testing.T) {
	ns := env.Namespace(t)
	_, m := start(t, ns)
	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "ok", "st")
	a := waitPhase(t, ns, "ok", agentsv1alpha1.PhaseRunning)
	if a.Status.JobName != "agent-job-ok" || a.Status.StartedAt == nil {
		t.Fatalf("Running without jobName/startedAt: %+v", a.Status)
	}
	job, err := env.Kube.BatchV1().Jobs(ns).Get(context.Background(), "agent-job-ok", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := job.OwnerReferences[0]; ref.UID != a.UID || !*ref.Controller || !*ref.BlockOwnerDeletion {
		t.Fatalf("Job owner reference %+v", ref)
	}
	finishPod(t, ns, "agent-job-ok", 0)
	a = waitPhase(t, ns, "ok", agentsv1alpha1.PhaseSucceeded)
	if *a.Status.ExitCode != 0 || a.Status.CompletedAt == nil {
		t.Fatalf("status %+v", a.Status)
	}
	eventually(t, "the completion metric", func() bool {
		return counterValue(m.RunsCompleted.WithLabelValues("Succeeded", "0")) == 1
	})
}

func TestAFailedJobFailsTheAgentWithItsExitCodeAndReason(t *testing.T) {
	ns := env.Namespace(t)
	start(t, ns)
	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "bad", "st")
	waitPhase(t, ns, "bad", agentsv1alpha1.PhaseRunning)
	finishPod(t, ns, "agent-job-bad", 3)
	a := waitPhase(t, ns, "bad", agentsv1alpha1.PhaseFailed)
	if *a.Status.ExitCode != 3 || !strings.Contains(a.Status.FailureReason, "BackoffLimitExceeded") {
		t.Fatalf("status %+v", a.Status)
	}
}

func TestAJobGarbageCollectedFirstFailsTheRun(t *testing.T) {
	ns := env.Namespace(t)
	start(t, ns)
	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "lost", "st")
	waitPhase(t, ns, "lost", agentsv1alpha1.PhaseRunning)
	bg := metav1.DeletePropagationBackground
	if err := env.Kube.BatchV1().Jobs(ns).Delete(context.Background(), "agent-job-lost", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	a := waitPhase(t, ns, "lost", agentsv1alpha1.PhaseFailed)
	if a.Status.FailureReason != decision.ReasonJobGarbageCollected || *a.Status.ExitCode != 1 {
		t.Fatalf("status %+v", a.Status)
	}
}

func TestAnInvalidTemplateFailsTheAgentInsteadOfLeavingItPending(t *testing.T) {
	ns := env.Namespace(t)
	start(t, ns)
	mkStation(t, ns, "st", func(s *agentsv1alpha1.StationSpec) { s.Template.Spec.Containers[0].Name = "main" })
	mkAgent(t, ns, "a", "st")
	a := waitPhase(t, ns, "a", agentsv1alpha1.PhaseFailed)
	if !strings.Contains(a.Status.FailureReason, `no container named "agent"`) {
		t.Fatalf("reason %q", a.Status.FailureReason)
	}
}

// TestConcurrencyUnderABurst creates many Agents at once and checks at every
// step that a Station never runs more than its limit.
func TestConcurrencyUnderABurst(t *testing.T) {
	cases := []struct {
		rule   string
		policy agentsv1alpha1.ConcurrencyPolicy
		max    int32
		limit  int
	}{
		{"Allow queues beyond maxConcurrentRuns", agentsv1alpha1.AllowConcurrent, 2, 2},
		{"Forbid runs one at a time", agentsv1alpha1.ForbidConcurrent, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			ns := env.Namespace(t)
			start(t, ns)
			mkStation(t, ns, "st", func(s *agentsv1alpha1.StationSpec) {
				s.ConcurrencyPolicy, s.MaxConcurrentRuns = c.policy, c.max
				s.SuccessfulRunsHistoryLimit = ptr.To[int32](10)
			})
			const n = 6
			for i := 0; i < n; i++ {
				mkAgent(t, ns, fmt.Sprintf("run-%d", i), "st")
			}
			finished := map[string]bool{}
			for len(finished) < n {
				var jobs *batchv1.JobList
				eventually(t, "a Job to run", func() bool {
					var err error
					jobs, err = env.Kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
					return err == nil && len(jobs.Items) > len(finished)
				})
				active := 0
				for _, j := range jobs.Items {
					if !finished[j.Name] {
						active++
					}
				}
				if active > c.limit {
					t.Fatalf("%d runs at once, limit %d", active, c.limit)
				}
				for _, j := range jobs.Items {
					if !finished[j.Name] {
						finished[j.Name] = true
						finishPod(t, ns, j.Name, 0)
						waitPhase(t, ns, strings.TrimPrefix(j.Name, "agent-job-"), agentsv1alpha1.PhaseSucceeded)
						break
					}
				}
			}
		})
	}
}

func TestReplacePreemptsTheOldestRun(t *testing.T) {
	ns := env.Namespace(t)
	_, m := start(t, ns)
	mkStation(t, ns, "st", func(s *agentsv1alpha1.StationSpec) { s.ConcurrencyPolicy = agentsv1alpha1.ReplaceConcurrent })
	mkAgent(t, ns, "first", "st")
	waitPhase(t, ns, "first", agentsv1alpha1.PhaseRunning)
	mkAgent(t, ns, "second", "st")
	waitPhase(t, ns, "second", agentsv1alpha1.PhaseRunning)
	eventually(t, "the oldest run to be deleted", func() bool { return getAgent(t, ns, "first") == nil })
	if v := counterValue(m.RunFailures.WithLabelValues("preempted")); v != 1 {
		t.Errorf("preempted counter %v", v)
	}
}

func TestHistoryIsPrunedPerPhase(t *testing.T) {
	ns := env.Namespace(t)
	start(t, ns)
	mkStation(t, ns, "st", func(s *agentsv1alpha1.StationSpec) { s.SuccessfulRunsHistoryLimit = ptr.To[int32](1) })
	for _, name := range []string{"a", "b", "c"} {
		mkAgent(t, ns, name, "st")
		waitPhase(t, ns, name, agentsv1alpha1.PhaseRunning)
		finishPod(t, ns, "agent-job-"+name, 0)
		waitPhase(t, ns, name, agentsv1alpha1.PhaseSucceeded)
	}
	eventually(t, "only the newest Succeeded run to remain", func() bool {
		return getAgent(t, ns, "a") == nil && getAgent(t, ns, "b") == nil && getAgent(t, ns, "c") != nil
	})
}

// TestAStaleStatusWriteIsRejected applies a plan computed from an old read:
// the resourceVersion precondition turns it into a 409, which is dropped,
// and the newer status survives.
func TestAStaleStatusWriteIsRejected(t *testing.T) {
	ns := env.Namespace(t)
	ctl, _ := start(t, ns)
	mkAgent(t, ns, "x", "nowhere-yet")
	stale := waitPhase(t, ns, "x", agentsv1alpha1.PhaseFailed)
	fresh := stale.DeepCopy()
	fresh.Status.FailureReason = "newer write"
	if err := env.Client.Status().Update(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	plan := decision.Plan{Status: stale.Status.DeepCopy()}
	plan.Status.FailureReason = "computed from a stale read"
	result, err := ctl.apply(context.Background(), stale, decision.Snapshot{}, plan)
	if err != nil || result != resultConflict {
		t.Fatalf("want a dropped conflict, got %q %v", result, err)
	}
	if got := getAgent(t, ns, "x").Status.FailureReason; got != "newer write" {
		t.Fatalf("the stale write clobbered the newer one: %q", got)
	}
}

// TestOnlyTheLeaderReconciles runs two replicas against one Lease: one
// reconciles, and after it stops the other takes over; no Agent ever gets
// two Jobs, since Job creation is keyed on the Agent name.
func TestTwoReplicasShareOneLease(t *testing.T) {
	ns := env.Namespace(t)
	mkStation(t, ns, "st", nil)
	type replica struct {
		cancel context.CancelFunc
		done   chan struct{}
		leads  *sync.Map
	}
	leads := &sync.Map{}
	run := func(id string) replica {
		ctx, cancel := context.WithCancel(context.Background())
		r := replica{cancel: cancel, done: make(chan struct{}), leads: leads}
		go func() {
			defer close(r.done)
			runReplica(ctx, t, ns, id, leads)
		}()
		return r
	}
	a, b := run("replica-a"), run("replica-b")
	defer func() { a.cancel(); b.cancel(); <-a.done; <-b.done }()
	mkAgent(t, ns, "one", "st")
	waitPhase(t, ns, "one", agentsv1alpha1.PhaseRunning)
	first := currentLeader(t, ns)
	leader, other := a, b
	if first == "replica-b" {
		leader, other = b, a
	}
	leader.cancel()
	<-leader.done
	eventually(t, "the standby to take over", func() bool {
		id := currentLeader(t, ns)
		return id != "" && id != first
	})
	mkAgent(t, ns, "two", "st")
	waitPhase(t, ns, "two", agentsv1alpha1.PhaseRunning)
	jobs, err := env.Kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 2 {
		t.Fatalf("%d Jobs for 2 Agents", len(jobs.Items))
	}
	_ = other
}

func currentLeader(t *testing.T, ns string) string {
	t.Helper()
	l, err := env.Kube.CoordinationV1().Leases(ns).Get(context.Background(), "agent-controller", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
