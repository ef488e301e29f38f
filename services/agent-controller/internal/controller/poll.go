package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metalist"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// pollLoop is the safety net beside the watch: every PollInterval (with a
// little jitter) the poll checks the cache against the API server and
// reconciles every Agent, so one whose watch event was missed is still
// handled.
func (c *Controller) pollLoop(ctx context.Context) {
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		if err := c.poll(ctx); err != nil {
			n := c.pollFailures.Add(1)
			c.log.Warn("poll failed", "err", err, "consecutive", n)
			return
		}
		c.pollFailures.Store(0)
	}, c.opts.PollInterval, 0.1, true)
}

// pollTimeout bounds one poll, every page of its LISTs included.
const pollTimeout = 2 * time.Minute

// poll first LISTs the Agents' metadata only: when every Agent is cached
// at the version listed (or known undecodable at it), the cache is
// current, and that LIST alone shows which cached Agents are gone. Only
// when the cache is behind does it LIST the Agents whole to refresh it.
// Decoding every Agent whole was nearly all an idle controller's CPU
// (docs/benchmarks.md); metadata carries no spec or status to decode.
func (c *Controller) poll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	behind, err := c.pollAgentVersions(ctx)
	if err != nil {
		return fmt.Errorf("list Agents' metadata: %w", err)
	}
	var refreshed map[string]bool
	if behind {
		if refreshed, err = c.pollAgents(ctx); err != nil {
			return err
		}
	}
	c.forgetGone()
	// Jobs too: a run decides from its cached Job while it runs, so a Job
	// watch that missed the end would leave the Agent Running for good.
	// The owners of the Jobs the poll found changed get a pass.
	owners, jobsErr := c.pollJobs(ctx)
	counts := map[agentsv1alpha1.AgentPhase]int{}
	// follow: the owners of changed Jobs, at followPriority as the Job
	// informer queues them; keys: the rest.
	var follow, keys []string
	jobs := c.jobs.GetIndexer()
	for _, obj := range c.agents.GetIndexer().List() {
		a, ok := obj.(*agentsv1alpha1.Agent)
		if !ok {
			continue
		}
		phase := a.Status.Phase
		if phase == "" {
			phase = agentsv1alpha1.PhasePending
		}
		counts[phase]++
		key := a.Namespace + "/" + a.Name
		var job *decision.RunJob
		if obj, ok, _ := jobs.GetByKey(a.Namespace + "/" + decision.JobNameOf(a)); ok {
			job, _ = obj.(*decision.RunJob)
		}
		// An Agent the poll refreshed changed without a watch event (or
		// before it: the event then finds the version cached and brings
		// nothing), so the poll gives it the pass the event would have.
		// The Agents cached as listed pass only where a pass may decide
		// something: under churn the LIST is nearly always a little
		// ahead of the watch, and a pass over every cached Agent then
		// was most of the reconciles of a large run.
		switch {
		case owners[key]:
			follow = append(follow, key)
		case refreshed[key] || jobsErr != nil || decision.PollPasses(a, job):
			keys = append(keys, key)
		}
	}
	c.m.SetPhaseCounts(counts)
	c.m.SetStations(c.stationLoads())
	c.queue.AddWithOpts(following, follow...)
	c.queue.AddWithOpts(priorityqueue.AddOpts{}, keys...)
	return jobsErr
}

// pollAgentVersions LISTs every page of the Agents' metadata and reports
// whether the cache is behind: an Agent listed at a newer
// resourceVersion than its cached copy, or one not cached that is not
// known undecodable at the version listed. When it is not behind, the
// Agents the LIST no longer holds are evicted as a full LIST would.
func (c *Controller) pollAgentVersions(ctx context.Context) (behind bool, err error) {
	lw, idx := c.lw, c.agents.GetIndexer()
	listed := map[string]bool{}
	listRV, err := lw.listVersions(ctx, func(m *metalist.Item, listRV string) {
		key := m.Namespace + "/" + m.Name
		listed[key] = true
		old, ok, _ := idx.GetByKey(key)
		if a, isAgent := old.(*agentsv1alpha1.Agent); ok && isAgent {
			behind = behind || rvNewer(m.ResourceVersion, a.ResourceVersion)
		} else if !lw.bad.known(key, m.ResourceVersion, listRV) {
			behind = true
		}
	})
	if err != nil {
		return false, err
	}
	c.m.Resyncs.Inc()
	if !behind {
		c.evictMissing(listed, listRV)
		lw.bad.listed(listRV)
	}
	return behind, nil
}

// pollAgents refreshes the Agent cache from a full paginated LIST: a
// listed Agent newer than the cached copy (or not cached) replaces it,
// and a cached Agent the LIST no longer holds is dropped when the LIST
// is newer. It returns the keys of the Agents it replaced or added.
func (c *Controller) pollAgents(ctx context.Context) (refreshed map[string]bool, err error) {
	listed, refreshed := map[string]bool{}, map[string]bool{}
	listRV, err := listPages(ctx, c.lw, func(page runtime.Object) {
		list := page.(*agentsv1alpha1.AgentList)
		for i := range list.Items {
			a := &list.Items[i]
			key := a.Namespace + "/" + a.Name
			if c.storeIfNewer(a) {
				refreshed[key] = true
			}
			listed[key] = true
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list Agents: %w", err)
	}
	c.evictMissing(listed, listRV)
	return refreshed, nil
}

// pollJobs checks the Job cache against a metadata LIST of run Jobs, as
// the Agents' poll does: only when a listed Job is missing from the cache
// or newer than its cached copy are the Jobs read whole (readJobsWhole)
// to refresh it. A cached Job the LIST no longer holds is dropped when the
// LIST is newer (its deletion was missed; readRun then confirms it live).
// It returns the keys of the Agents controlling the Jobs it replaced or
// dropped: their watch events were missed, so the poll gives them a pass.
func (c *Controller) pollJobs(ctx context.Context) (owners map[string]bool, err error) {
	idx := c.jobs.GetIndexer()
	listed := map[string]bool{}
	owners = map[string]bool{}
	owned := func(j *decision.RunJob) {
		if ref := metav1.GetControllerOf(j); ref != nil && ref.Kind == "Agent" {
			owners[j.Namespace+"/"+ref.Name] = true
		}
	}
	refreshed := 0
	behind := false
	listRV, err := c.jobLW.listVersions(ctx, func(m *metalist.Item, _ string) {
		key := m.Namespace + "/" + m.Name
		listed[key] = true
		old, ok, _ := idx.GetByKey(key)
		o, isJob := old.(*decision.RunJob)
		behind = behind || !ok || !isJob || rvNewer(m.ResourceVersion, o.ResourceVersion)
	})
	if err != nil {
		return owners, fmt.Errorf("list Jobs' metadata: %w", err)
	}
	if behind {
		listed = map[string]bool{}
		listRV, err = c.readJobsWhole(ctx, listed, owned, &refreshed)
		if err != nil {
			return owners, err
		}
	}
	for _, obj := range idx.List() {
		j, ok := obj.(*decision.RunJob)
		if !ok || listed[j.Namespace+"/"+j.Name] || !rvNewer(listRV, j.ResourceVersion) {
			continue
		}
		owned(j)
		_ = idx.Delete(j)
		refreshed++
	}
	if refreshed > 0 {
		c.log.Info("poll found Jobs ended or gone that the watch had not delivered", "jobs", refreshed)
	}
	return owners, nil
}

// readJobsWhole refreshes the Job cache from a full paginated LIST of run
// Jobs, noting each listed key in listed and with owned each Job new or
// newer than its cached copy whose owner needs a pass; it counts in
// refreshed the Jobs whose end the watch had not delivered.
func (c *Controller) readJobsWhole(ctx context.Context, listed map[string]bool, owned func(*decision.RunJob), refreshed *int) (string, error) {
	idx := c.jobs.GetIndexer()
	listRV, err := listPages(ctx, c.jobLW, func(page runtime.Object) {
		_ = meta.EachListItem(page, func(obj runtime.Object) error {
			j, isJob := obj.(*decision.RunJob)
			if !isJob {
				return nil
			}
			key := j.Namespace + "/" + j.Name
			listed[key] = true
			old, ok, _ := idx.GetByKey(key)
			o, isJob := old.(*decision.RunJob)
			cached := ok && isJob
			if cached {
				if !rvNewer(j.ResourceVersion, o.ResourceVersion) {
					return nil
				}
				if o.Finished != j.Finished {
					*refreshed++
				}
			}
			// As the Job informer's handlers do: a new Job its Agent does
			// not follow yet, or a change a decision reads, brings its
			// owner's pass; the counters the Job controller keeps moving
			// do not.
			if cached && decision.JobChangeMatters(o, j) || !cached && c.newJobBringsPass(j) {
				owned(j)
			}
			_ = idx.Update(j)
			return nil
		})
	})
	if err != nil {
		return "", fmt.Errorf("list Jobs: %w", err)
	}
	return listRV, nil
}

// stationLoads counts each cached Station's slots as admission does
// (decision.ActiveRuns): its runs that hold one, and those this
// controller admitted that the cache does not show yet.
func (c *Controller) stationLoads() map[metrics.StationKey]metrics.StationLoad {
	loads := map[metrics.StationKey]metrics.StationLoad{}
	for _, obj := range c.stations.GetIndexer().List() {
		st, ok := obj.(*agentsv1alpha1.Station)
		if !ok {
			continue
		}
		snap := decision.Snapshot{Station: st}
		c.fillSlots(&snap, st.Namespace, st.Name, st.Namespace+"/"+st.Name)
		loads[metrics.StationKey{Namespace: st.Namespace, Name: st.Name}] = metrics.StationLoad{
			Active: decision.ActiveRuns(snap), Max: st.Spec.EffectiveMaxConcurrent()}
	}
	return loads
}

// evictMissing drops cached Agents the LIST no longer holds, when the cached
// copy is older than the LIST: the watch missed their deletion.
func (c *Controller) evictMissing(listed map[string]bool, listRV string) {
	idx := c.agents.GetIndexer()
	for _, obj := range idx.List() {
		a, ok := obj.(*agentsv1alpha1.Agent)
		if !ok || listed[a.Namespace+"/"+a.Name] {
			continue
		}
		if rvNewer(listRV, a.ResourceVersion) {
			_ = idx.Delete(a)
			c.inflight.forget(a.Namespace + "/" + a.Name)
		}
	}
}

// forgetGone drops the per-run bookkeeping, kept by uid, of Agents the
// cache no longer holds: their deletion was seen by the watch or by this
// poll's evictMissing. Entries are only made for cached Agents, so this
// bounds them by the Agents that exist, whichever way a run ended or went.
func (c *Controller) forgetGone() {
	live := map[string]bool{}
	for _, obj := range c.agents.GetIndexer().List() {
		if a, ok := obj.(*agentsv1alpha1.Agent); ok {
			live[string(a.UID)] = true
		}
	}
	for _, m := range []*sync.Map{&c.batchAsked, &c.batchNoticed, &c.cleanupAt} {
		m.Range(func(k, _ any) bool {
			if uid, _ := k.(string); !live[uid] {
				m.Delete(k)
			}
			return true
		})
	}
}

// listPages LISTs every page of lw's kind under ctx, handing each page to
// each, and returns the first page's resourceVersion.
func listPages(ctx context.Context, lw *listWatch, each func(runtime.Object)) (string, error) {
	listRV := ""
	opts := metav1.ListOptions{}
	for {
		obj, err := lw.ListWithContext(ctx, opts)
		if err != nil {
			return "", err
		}
		acc, err := meta.ListAccessor(obj)
		if err != nil {
			return "", err
		}
		if listRV == "" {
			listRV = acc.GetResourceVersion()
		}
		each(obj)
		if acc.GetContinue() == "" {
			return listRV, nil
		}
		opts.Continue = acc.GetContinue()
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
	}
}
