// Package controller is the agent controller's I/O shell around the pure
// decisions of package decision: a watch (client-go reflector) and an
// independent poll share one cache of Agents; every change enqueues the
// Agent, and workers gather a snapshot, decide, and apply the writes.
package controller

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	kevents "k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	batchpb "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
	"github.com/agentplane/agentplane/services/agent-controller/internal/runpolicy"
)

// byStation indexes cached Agents by namespace/stationRef, so concurrency
// counts and pruning read the cache instead of listing per reconcile.
const byStation = "station"

// byStationFinished indexes cached finished Agents by
// namespace/stationRef/phase, and byStationWaiting the Agents that wait
// for a slot of their Station by namespace/stationRef: a run's end reads
// its Station's history to prune and its waiting runs to wake, not every
// run of the Station, which made each end cost as much as the Station is
// large (docs/benchmarks.md).
const (
	byStationFinished = "station-finished"
	byStationWaiting  = "station-waiting"
)

// Defaults of Options, and of the flags that set them (--workers,
// --poll-interval).
const (
	// DefaultWorkers: a reconcile mostly waits on the API server, so many
	// run at once (docs/benchmarks.md).
	DefaultWorkers = 32
	// DefaultPollInterval is the period of the poll behind the watch.
	DefaultPollInterval = 15 * time.Second
)

// Options configure a Controller.
type Options struct {
	// Namespace limits the controller to one namespace; "" watches all.
	Namespace string
	// Workers is how many Agents are reconciled at once.
	Workers int
	// PollInterval is the period of the safety-net full LIST.
	PollInterval time.Duration
	// PageSize is the LIST page size.
	PageSize int64
	// WatchTimeout caps the server-side timeoutSeconds of each watch, after
	// which the API server ends it and the reflector reconnects from the
	// last resourceVersion; 0 keeps client-go's 5-10 minutes.
	WatchTimeout time.Duration
	// Reconcile configures the decisions.
	Reconcile decision.Config
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Log receives structured logs; slog.Default when nil.
	Log *slog.Logger
	// Batch is the batch-poller client; nil when batch runs are disabled.
	Batch batchpb.BatchServiceClient
	// Events publishes batch runs' events to the platform stream and
	// carries batch-poller's completion notices; nil without NATS.
	Events *events.Publisher
	// RealtimeKeyNamespace holds the realtime key Secret shared with
	// realtime-gateway.
	RealtimeKeyNamespace string
	// NATS mints each run's NATS credential; nil gives runs none. Set it
	// with Reconcile.Job.NATSCredentials (and NATSCA with its CA), which
	// make the Jobs mount it.
	NATS *NATSCredentials
	// BatchCleanupBackoff is the wait before retrying a failed batch
	// cleanup, doubled per attempt; default 1s.
	BatchCleanupBackoff time.Duration
	// Recorder records the Kubernetes Events of each Agent's transitions
	// (events.k8s.io/v1); nil records none.
	Recorder kevents.EventRecorder
	// RunNetworkPolicy, when set, guards every run pod with its
	// namespace's run NetworkPolicy, made sure of before its Job
	// (runpolicy.For); nil creates none.
	RunNetworkPolicy *runpolicy.Config
}

// Controller drives Agents through their lifecycle.
type Controller struct {
	c    client.WithWatch
	kube kubernetes.Interface
	m    *metrics.Metrics
	opts Options
	log  *slog.Logger

	lw *listWatch
	// jobLW lists run Jobs for the poll, as the Job informer does.
	jobLW    *listWatch
	agents   cache.SharedIndexInformer
	jobs     cache.SharedIndexInformer
	stations cache.SharedIndexInformer
	defs     cache.SharedIndexInformer
	queue    priorityqueue.PriorityQueue[string]
	locks    sync.Map // station key → *sync.Mutex
	// runPolicies holds, by namespace/name, when a run NetworkPolicy was
	// last found as built (ensureRunPolicy).
	runPolicies sync.Map
	// runPolicySync makes the starts that need the same run NetworkPolicy
	// at once wait on one sync of it.
	runPolicySync singleflight.Group
	// creating holds, by namespace/name, the Jobs a pass is creating
	// now: that pass records the run's status itself (or fails and is
	// retried), so the Job's arrival in the cache brings no pass of its
	// own.
	creating sync.Map
	inflight inflight

	synced       atomic.Bool
	pollFailures atomic.Int32

	// batchAsked holds when each batch run (by uid) was last asked about,
	// batchNoticed the runs a completion notice arrived for.
	batchAsked   sync.Map
	batchNoticed sync.Map
	// cleanupAt holds when a failed batch cleanup may be tried again.
	cleanupAt sync.Map
	// notices tracks sink deliveries still in progress.
	notices sync.WaitGroup
}

// New returns a Controller; Run starts it.
func New(c client.WithWatch, kube kubernetes.Interface, m *metrics.Metrics, opts Options) *Controller {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 500
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Reconcile.Job.SupervisorImage == "" {
		opts.Reconcile.Job.SupervisorImage = "agentplane/supervisor:dev"
	}
	if opts.Reconcile.Job.SupervisorPath == "" {
		opts.Reconcile.Job.SupervisorPath = "/supervisor"
	}
	if opts.RealtimeKeyNamespace == "" {
		opts.RealtimeKeyNamespace = "default"
	}
	if opts.BatchCleanupBackoff <= 0 {
		opts.BatchCleanupBackoff = time.Second
	}
	if opts.Reconcile.BatchPoll <= 0 {
		opts.Reconcile.BatchPoll = decision.DefaultBatchPoll
	}
	if opts.Reconcile.BatchTimeoutUnit <= 0 {
		opts.Reconcile.BatchTimeoutUnit = time.Minute
	}
	if opts.Reconcile.MaxOutputBytes <= 0 {
		opts.Reconcile.MaxOutputBytes = decision.DefaultMaxOutputBytes
	}
	ctl := &Controller{c: c, kube: kube, m: m, opts: opts, log: opts.Log, inflight: inflight{byStation: map[string]map[string]bool{}}}
	// Every kind is listed and watched through the same client, each
	// object decoded on its own (see listWatch).
	// The poll's metadata LISTs name their whole path: any of kube's REST
	// clients carries them.
	var versions rest.Interface
	if kube != nil {
		versions = kube.CoreV1().RESTClient()
	}
	watched := func(obj client.Object, list client.ObjectList, gvk schema.GroupVersionKind, resource string) *listWatch {
		return &listWatch{c: c, gvk: gvk, namespace: opts.Namespace, pageSize: opts.PageSize, versions: versions, resource: resource,
			newObj:  func() client.Object { return obj.DeepCopyObject().(client.Object) },
			newList: func() client.ObjectList { return list.DeepCopyObject().(client.ObjectList) },
			bad:     newUndecodables(gvk.Kind, opts.Log, m.Undecodable.WithLabelValues(gvk.Kind)),
		}
	}
	ctl.lw = watched(&agentsv1alpha1.Agent{}, &agentsv1alpha1.AgentList{}, agentsv1alpha1.GroupVersion.WithKind("Agent"), "agents")
	ctl.lw.watchTimeout = opts.WatchTimeout
	ctl.lw.onList = func() { m.Resyncs.Inc() }
	ctl.lw.onWatch = func(reconnect bool) {
		if reconnect {
			m.WatchReconnects.Inc()
		}
	}
	ctl.agents = cache.NewSharedIndexInformer(ctl.lw, &agentsv1alpha1.Agent{}, 0, cache.Indexers{
		byStation: stationIndex, byStationFinished: finishedIndex, byStationWaiting: waitingIndex})
	jobs := watched(&batchv1.Job{}, &batchv1.JobList{}, batchv1.SchemeGroupVersion.WithKind("Job"), "jobs")
	jobs.labelSelector = agentsv1alpha1.LabelComponent + "=" + agentsv1alpha1.ComponentJob
	jobs.typed = true
	// The cache holds every run's Job: only what the decisions read of
	// one is kept (decision.RunJob).
	jobs.slim = func(o runtime.Object) runtime.Object {
		if j, ok := o.(*batchv1.Job); ok {
			return decision.RunJobOf(j)
		}
		return o
	}
	ctl.jobs = cache.NewSharedIndexInformer(jobs, &decision.RunJob{}, 0, cache.Indexers{})
	ctl.jobLW = jobs
	ctl.stations = cache.NewSharedIndexInformer(watched(&agentsv1alpha1.Station{}, &agentsv1alpha1.StationList{}, agentsv1alpha1.GroupVersion.WithKind("Station"), "stations"),
		&agentsv1alpha1.Station{}, 0, cache.Indexers{})
	ctl.defs = cache.NewSharedIndexInformer(watched(&agentsv1alpha1.AgentDefinition{}, &agentsv1alpha1.AgentDefinitionList{}, agentsv1alpha1.GroupVersion.WithKind("AgentDefinition"), "agentdefinitions"),
		&agentsv1alpha1.AgentDefinition{}, 0, cache.Indexers{})
	ctl.queue = priorityqueue.New("agents", func(o *priorityqueue.Opts[string]) {
		o.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[string]()
		o.MetricProvider = m.Workqueue
	})
	return ctl
}

func stationIndex(obj any) ([]string, error) {
	a, ok := obj.(*agentsv1alpha1.Agent)
	if !ok {
		return nil, nil
	}
	return []string{a.Namespace + "/" + a.Spec.StationRef}, nil
}

// finishedIndex is the byStationFinished key of a finished Agent.
func finishedIndex(obj any) ([]string, error) {
	a, ok := obj.(*agentsv1alpha1.Agent)
	if !ok || !a.Status.Phase.IsTerminal() {
		return nil, nil
	}
	return []string{finishedKey(a.Namespace, a.Spec.StationRef, a.Status.Phase)}, nil
}

func finishedKey(namespace, station string, phase agentsv1alpha1.AgentPhase) string {
	return namespace + "/" + station + "/" + string(phase)
}

// waitingIndex is the byStationWaiting key of an Agent waiting for a slot.
func waitingIndex(obj any) ([]string, error) {
	a, ok := obj.(*agentsv1alpha1.Agent)
	if !ok || !decision.WaitsForSlot(a) {
		return nil, nil
	}
	return []string{a.Namespace + "/" + a.Spec.StationRef}, nil
}

// Synced reports whether the first LIST has filled the cache.
func (c *Controller) Synced() bool { return c.synced.Load() }

// Healthy reports whether the poll works: false after 3 failures in a row.
func (c *Controller) Healthy() bool { return c.pollFailures.Load() < 3 }

// WorkWaiting reports whether passes wait for a worker: the controller
// is behind, and the API server's writes are best left to its runs
// (eventpace.Recorder.YieldTo).
func (c *Controller) WorkWaiting() bool { return c.queue.Len() > 0 }

// Run reconciles until ctx ends, then lets the passes under way finish
// and returns; passes still queued are left (the next leader's first
// LIST finds their Agents).
func (c *Controller) Run(ctx context.Context) error {
	// Once: the priority queue's ShutDown may not be called twice.
	shutDown := sync.OnceFunc(c.queue.ShutDown)
	defer shutDown()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := c.agents.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, obj any) {
			// The same version is the echo of this controller's own write
			// (stored on success, storeIfNewer): the pass that wrote it
			// decided from it already.
			o, okOld := old.(*agentsv1alpha1.Agent)
			n, okNew := obj.(*agentsv1alpha1.Agent)
			if okOld && okNew && o.ResourceVersion == n.ResourceVersion {
				return
			}
			enqueue(obj)
		},
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.inflight.forget(key)
			}
		},
	}); err != nil {
		return fmt.Errorf("agent handler: %w", err)
	}
	if _, err := c.jobs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueOwnerOfNewJob,
		UpdateFunc: func(old, obj any) {
			o, okOld := old.(*decision.RunJob)
			n, okNew := obj.(*decision.RunJob)
			if !okOld || !okNew || decision.JobChangeMatters(o, n) {
				c.enqueueOwner(obj)
			}
		},
		DeleteFunc: c.enqueueOwner,
	}); err != nil {
		return fmt.Errorf("job handler: %w", err)
	}
	go c.agents.RunWithContext(ctx)
	go c.jobs.RunWithContext(ctx)
	go c.stations.RunWithContext(ctx)
	go c.defs.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.agents.HasSynced, c.jobs.HasSynced, c.stations.HasSynced, c.defs.HasSynced) {
		return ctx.Err()
	}
	c.synced.Store(true)
	c.log.Info("agent cache synced", "agents", len(c.agents.GetStore().ListKeys()))
	if c.opts.Events != nil && c.opts.Batch != nil {
		// Completion notices only wake runs early; the poll still finds
		// every finished batch if one is missed.
		sub, err := events.SubscribeBatchNotices(c.opts.Events.Conn(), "", "", c.noticeBatch)
		if err != nil {
			c.log.Warn("no batch completion notices; relying on polling", "err", err)
		} else {
			defer func() { _ = sub.Unsubscribe() }()
		}
	}

	var wg sync.WaitGroup
	for i := 0; i < c.opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx) {
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.pollLoop(ctx)
	}()
	<-ctx.Done()
	shutDown()
	wg.Wait()
	c.notices.Wait()
	c.synced.Store(false)
	return nil
}

// followPriority is the queue priority of a pass a run's Job brought (its
// end, its deletion, a change a decision reads). Following a run that
// holds its slot goes ahead of admitting new ones: in a burst, a finished
// run's Agent follows its Job without waiting behind thousands of
// admissions, and the slot it frees goes to the next run sooner.
const followPriority = 1

// following adds a pass at followPriority.
var following = priorityqueue.AddOpts{Priority: ptr.To(followPriority)}

// enqueueOwner queues the Agent controlling a Job at followPriority.
func (c *Controller) enqueueOwner(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	job, ok := obj.(*decision.RunJob)
	if !ok {
		return
	}
	for _, o := range job.OwnerReferences {
		if o.Kind == "Agent" && o.Controller != nil && *o.Controller {
			c.queue.AddWithOpts(following, job.Namespace+"/"+o.Name)
		}
	}
}

// enqueueOwnerOfNewJob queues the Agent controlling a Job the cache just
// gained, when newJobBringsPass says so.
func (c *Controller) enqueueOwnerOfNewJob(obj any) {
	if job, ok := obj.(*decision.RunJob); ok && !c.newJobBringsPass(job) {
		return
	}
	c.enqueueOwner(obj)
}

// newJobBringsPass reports whether a run Job new to the cache should
// bring its owner a pass. It should not when the cached Agent already
// follows it and a pass would decide nothing (decision.PollPasses): the
// pass that created the Job wrote the Agent Running, and the Job's end
// brings the next one. Nor while the pass creating it has not yet stored
// the Agent's status: that pass decides from the Job it made. The Job
// arrives as created; what happens to it later comes as an update.
func (c *Controller) newJobBringsPass(job *decision.RunJob) bool {
	if _, mine := c.creating.Load(job.Namespace + "/" + job.Name); mine {
		return false
	}
	if ref := metav1.GetControllerOf(job); ref != nil && ref.Kind == "Agent" {
		cached, found, _ := c.agents.GetIndexer().GetByKey(job.Namespace + "/" + ref.Name)
		if a, isAgent := cached.(*agentsv1alpha1.Agent); found && isAgent && decision.IsRunJob(job, a) && !decision.PollPasses(a, job) {
			return false
		}
	}
	return true
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	result, err := c.reconcileKey(ctx, key)
	c.m.Reconciles.WithLabelValues(result).Inc()
	if err != nil {
		c.log.Warn("reconcile failed; retrying with backoff", "agent", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// lockAdmission serialises admissions per Station, so two workers never
// both take the last slot, and returns the unlock. Admission under a limit
// reads the Station's runs and adds one; an unlimited Station (or none)
// needs no lock.
func (c *Controller) lockAdmission(station *agentsv1alpha1.Station, key string) (unlock func()) {
	if station == nil || station.Spec.EffectiveMaxConcurrent() <= 0 {
		return func() {}
	}
	l, _ := c.locks.LoadOrStore(key, &sync.Mutex{})
	mu := l.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// cachedRuns returns the cached Agents of a Station.
func (c *Controller) cachedRuns(namespace, station string) []*agentsv1alpha1.Agent {
	return c.indexed(byStation, namespace+"/"+station)
}

// indexed returns the cached Agents under key in index.
func (c *Controller) indexed(index, key string) []*agentsv1alpha1.Agent {
	objs, err := c.agents.GetIndexer().ByIndex(index, key)
	if err != nil {
		return nil
	}
	out := make([]*agentsv1alpha1.Agent, 0, len(objs))
	for _, o := range objs {
		if a, ok := o.(*agentsv1alpha1.Agent); ok {
			out = append(out, a)
		}
	}
	return out
}

// storeIfNewer puts a into the cache unless the cache holds a newer
// version (the poll's LIST and our own patch results race with the
// watch), and reports whether it replaced an older version or none: what
// a watch event would have brought, had the watch delivered it. A write's
// answer carries the Agent's managedFields, which the watch's copies do
// not (decode drops them: nothing reads them); they are dropped here too,
// or the last write's answer would keep them in the cache for good when
// its own watch event came first.
func (c *Controller) storeIfNewer(a *agentsv1alpha1.Agent) (newer bool) {
	a.ManagedFields = nil
	idx := c.agents.GetIndexer()
	newer = true
	if old, ok, _ := idx.Get(a); ok {
		if o, ok := old.(*agentsv1alpha1.Agent); ok {
			if rvNewer(o.ResourceVersion, a.ResourceVersion) {
				return false
			}
			newer = rvNewer(a.ResourceVersion, o.ResourceVersion)
		}
	}
	_ = idx.Update(a)
	return newer
}

// rvNewer reports whether resourceVersion x is newer than y. Versions are
// opaque in general but etcd-backed servers issue increasing integers; when
// either is not one, y is taken as newer so fresh reads win.
func rvNewer(x, y string) bool {
	xi, err1 := strconv.ParseUint(x, 10, 64)
	yi, err2 := strconv.ParseUint(y, 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	return xi > yi
}

// inflight remembers runs this controller admitted until the cache shows
// them Running, so admissions are never over-counted or under-counted while
// the watch catches up.
type inflight struct {
	mu        sync.Mutex
	byStation map[string]map[string]bool
}

func (f *inflight) add(station, agent string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byStation[station] == nil {
		f.byStation[station] = map[string]bool{}
	}
	f.byStation[station][agent] = true
}

// count returns how many admitted runs of station, other than exclude, the
// cache does not yet show as Running, dropping the ones it does.
func (f *inflight) count(station, exclude string, runs []*agentsv1alpha1.Agent) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.byStation[station]
	if len(set) == 0 {
		return 0
	}
	seen := map[string]agentsv1alpha1.AgentPhase{}
	for _, r := range runs {
		seen[r.Name] = r.Status.Phase
	}
	for name := range set {
		if phase, ok := seen[name]; !ok || phase != agentsv1alpha1.PhasePending && phase != "" {
			delete(set, name)
		}
	}
	if set[exclude] {
		return len(set) - 1
	}
	return len(set)
}

func (f *inflight) forget(key string) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for st, set := range f.byStation {
		if len(st) > len(ns) && st[:len(ns)+1] == ns+"/" {
			delete(set, name)
		}
	}
}
