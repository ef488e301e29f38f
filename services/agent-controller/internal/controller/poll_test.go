package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

func cachedAgent(name, rv string, phase agentsv1alpha1.AgentPhase) *agentsv1alpha1.Agent {
	return &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv},
		Spec: agentsv1alpha1.AgentSpec{StationRef: "st"}, Status: agentsv1alpha1.AgentStatus{Phase: phase}}
}

func TestCacheRules(t *testing.T) {
	ctl := New(nil, nil, metrics.New(), Options{Log: quiet})
	idx := ctl.agents.GetIndexer()
	ctl.storeIfNewer(cachedAgent("a", "10", agentsv1alpha1.PhaseRunning))
	ctl.storeIfNewer(cachedAgent("a", "9", agentsv1alpha1.PhasePending))
	if got, _, _ := idx.GetByKey("ns/a"); got.(*agentsv1alpha1.Agent).ResourceVersion != "10" {
		t.Error("an older version from a LIST must not replace a newer cached one")
	}
	answered := cachedAgent("a", "11", agentsv1alpha1.PhaseSucceeded)
	answered.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "agent-controller", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}}
	ctl.storeIfNewer(answered)
	got, _, _ := idx.GetByKey("ns/a")
	if got.(*agentsv1alpha1.Agent).ResourceVersion != "11" {
		t.Error("a newer version replaces the cached one")
	}
	if got.(*agentsv1alpha1.Agent).ManagedFields != nil {
		t.Error("a write's answer is cached with its managedFields, which nothing reads")
	}
	ctl.storeIfNewer(cachedAgent("gone", "5", agentsv1alpha1.PhaseRunning))
	ctl.storeIfNewer(cachedAgent("fresh", "30", agentsv1alpha1.PhasePending))
	ctl.evictMissing(map[string]bool{"ns/a": true}, "20")
	if _, ok, _ := idx.GetByKey("ns/gone"); ok {
		t.Error("an Agent missing from a newer LIST is evicted (its deletion was missed)")
	}
	if _, ok, _ := idx.GetByKey("ns/fresh"); !ok {
		t.Error("an Agent newer than the LIST is kept (created after it)")
	}
	if runs := ctl.cachedRuns("ns", "st"); len(runs) != 2 {
		t.Errorf("the Station index holds %d runs, want 2", len(runs))
	}
}

func TestInflightCounting(t *testing.T) {
	var f inflight
	f.byStation = map[string]map[string]bool{}
	f.add("ns/st", "a")
	f.add("ns/st", "b")
	runs := []*agentsv1alpha1.Agent{cachedAgent("a", "1", agentsv1alpha1.PhasePending), cachedAgent("b", "1", agentsv1alpha1.PhaseRunning)}
	if n := f.count("ns/st", "", runs); n != 1 {
		t.Errorf("a run the cache shows Running is counted there, not in flight: got %d", n)
	}
	if n := f.count("ns/st", "a", runs); n != 0 {
		t.Errorf("the Agent being reconciled never counts against itself: got %d", n)
	}
	f.forget("ns/a")
	if n := f.count("ns/st", "", runs); n != 0 {
		t.Errorf("a deleted Agent is forgotten: got %d", n)
	}
}

// TestThePollsListIsBounded: every page of the poll's LIST runs under the
// poll's own deadline, so an API server that hangs cannot stall the poll,
// and the readiness it feeds, forever.
func TestThePollsListIsBounded(t *testing.T) {
	ns := env.Namespace(t)
	mkAgent(t, ns, "a", "st")
	var mu sync.Mutex
	var deadlines []time.Time
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	c := interceptor.NewClient(base, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			// The controller is not running: every LIST is the poll's.
			d, _ := ctx.Deadline()
			mu.Lock()
			deadlines = append(deadlines, d)
			mu.Unlock()
			return c.List(ctx, list, opts...)
		},
	})
	ctl := New(c, env.Kube, metrics.New(), Options{Namespace: ns, Log: quiet})
	if err := ctl.poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	latest := time.Now().Add(pollTimeout)
	mu.Lock()
	defer mu.Unlock()
	if len(deadlines) == 0 {
		t.Fatal("the poll listed no Agents")
	}
	for _, d := range deadlines {
		if d.IsZero() || d.After(latest) {
			t.Errorf("a LIST page of the poll ran with deadline %v, want one within the poll's %s", d, pollTimeout)
		}
	}
}

// TestBatchBookkeepingIsBoundedByTheAgents: what the controller remembers
// per batch run (when it last asked, a completion notice, a cleanup retry)
// lives only as long as the Agent: the poll drops the entries of Agents it
// no longer sees, and a notice for an Agent this controller does not hold
// leaves nothing behind.
func TestBatchBookkeepingIsBoundedByTheAgents(t *testing.T) {
	ns := env.Namespace(t)
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctl := New(base, env.Kube, metrics.New(), Options{Namespace: ns, Log: quiet})
	mkAgent(t, ns, "kept", "st")
	mkAgent(t, ns, "gone", "st")
	if err := ctl.poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	remember := func(namespace, name, uid string) {
		ctl.batchAsked.Store(uid, time.Now())
		ctl.cleanupAt.Store(uid, time.Now())
		ctl.noticeBatch(&eventsv1.RunEvent{Run: &eventsv1.RunIdentity{Namespace: namespace, Agent: name, Uid: uid}})
	}
	kept, gone := getAgent(t, ns, "kept"), getAgent(t, ns, "gone")
	remember(ns, "kept", string(kept.UID))
	remember(ns, "gone", string(gone.UID))
	ctl.noticeBatch(&eventsv1.RunEvent{Run: &eventsv1.RunIdentity{Namespace: "elsewhere", Agent: "stranger", Uid: "uid-stranger"}})
	if _, ok := ctl.batchNoticed.Load("uid-stranger"); ok {
		t.Error("a notice for an Agent this controller does not hold was kept until the next poll")
	}
	if err := env.Client.Delete(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	if err := ctl.poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		rule string
		uid  string
		want bool
	}{
		{"an Agent the poll still lists keeps its entries", string(kept.UID), true},
		{"an Agent the poll no longer lists loses its entries", string(gone.UID), false},
		{"a notice for an Agent this controller does not hold is not kept", "uid-stranger", false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			for name, m := range map[string]*sync.Map{"batchAsked": &ctl.batchAsked, "batchNoticed": &ctl.batchNoticed, "cleanupAt": &ctl.cleanupAt} {
				if _, ok := m.Load(c.uid); ok != c.want {
					t.Errorf("%s holds the entry: %v, want %v", name, ok, c.want)
				}
			}
		})
	}
}

// idleController is a Controller for a fresh namespace that is not
// running: the test drives its informers and poll itself.
func idleController(t *testing.T) (string, *Controller) {
	t.Helper()
	ns := env.Namespace(t)
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return ns, New(base, env.Kube, metrics.New(), Options{Namespace: ns, Log: quiet})
}

// runJob is a run Job agent-job-a in ns, labelled as the controller
// labels them, whose pod is spec.
func runJob(ns string, spec corev1.PodSpec) *batchv1.Job {
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-job-a", Namespace: ns,
			Labels: map[string]string{agentsv1alpha1.LabelComponent: agentsv1alpha1.ComponentJob}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec}},
	}
}

// TestThePollRefreshesJobsTheWatchMissed: the poll LISTs the run Jobs as
// well as the Agents, so a Job whose end (or deletion) the watch never
// delivered does not leave its Agent Running: a listed Job newer than the
// cached copy replaces it, and a cached Job the LIST no longer holds is
// dropped.
func TestThePollRefreshesJobsTheWatchMissed(t *testing.T) {
	ns, ctl := idleController(t)
	live := runJob(ns, corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent"}}})
	if err := env.Client.Create(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	idx := ctl.jobs.GetIndexer()
	stale := live.DeepCopy()
	stale.ResourceVersion = "1"
	deleted := live.DeepCopy()
	deleted.Name, deleted.ResourceVersion = "agent-job-deleted", "2"
	for _, j := range []*batchv1.Job{stale, deleted} {
		if err := idx.Add(decision.RunJobOf(j)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ctl.poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, ok, _ := idx.GetByKey(ns + "/agent-job-a")
	if !ok || rvNewer(live.ResourceVersion, got.(*decision.RunJob).ResourceVersion) {
		t.Errorf("the cached Job is %v, want the live one (resourceVersion %s or later)", got, live.ResourceVersion)
	}
	if _, ok, _ := idx.GetByKey(ns + "/agent-job-deleted"); ok {
		t.Error("a cached Job missing from a newer LIST must be dropped: its deletion was missed")
	}
}

// TestThePollPassesOnlyWhereAJobChangeMatters: a Job the poll finds newer
// than its cached copy brings its owner a pass when the change is one a
// decision reads (its end here), as the Job informer's handler does, and
// none when only what the Job controller keeps moving changed.
func TestThePollPassesOnlyWhereAJobChangeMatters(t *testing.T) {
	now := metav1.Now()
	running := batchv1.JobStatus{StartTime: &now, Active: 1}
	cases := []struct {
		rule         string
		live, cached batchv1.JobStatus
		passes       int
	}{
		{"a running Job whose counters moved brings no pass", running, batchv1.JobStatus{StartTime: &now}, 0},
		{"a Job whose end the cache missed brings its owner's pass", batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1,
			Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}}, running, 1},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			ns, ctl := idleController(t)
			defer ctl.queue.ShutDown()
			// A Running Agent, cached as stored, whose run Job is agent-job-a.
			mkAgent(t, ns, "a", "st")
			a := getAgent(t, ns, "a")
			a.Status = agentsv1alpha1.AgentStatus{Phase: agentsv1alpha1.PhaseRunning, JobName: "agent-job-a", StartedAt: &now}
			if err := env.Client.Status().Update(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			if err := ctl.agents.GetIndexer().Add(a); err != nil {
				t.Fatal(err)
			}
			live := runJob(ns, corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent"}}})
			live.OwnerReferences = []metav1.OwnerReference{*controllerRef(a)}
			if err := env.Client.Create(context.Background(), live); err != nil {
				t.Fatal(err)
			}
			live.Status = tc.live
			if err := env.Client.Status().Update(context.Background(), live); err != nil {
				t.Fatal(err)
			}
			stale := live.DeepCopy()
			stale.ResourceVersion, stale.Status = "1", tc.cached
			if err := ctl.jobs.GetIndexer().Add(decision.RunJobOf(stale)); err != nil {
				t.Fatal(err)
			}
			if err := ctl.poll(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := ctl.queue.Len(); n != tc.passes {
				t.Errorf("%d passes queued, want %d", n, tc.passes)
			}
		})
	}
}
