package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// pollLoop is the safety net beside the watch: every PollInterval (with a
// little jitter) a full paginated LIST refreshes the cache and reconciles
// every Agent, so one whose watch event was missed is still handled.
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

// pollTimeout bounds one poll, every page of its LIST included.
const pollTimeout = 2 * time.Minute

func (c *Controller) poll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	counts := map[agentsv1alpha1.AgentPhase]int{}
	var keys []string
	listed := map[string]bool{}
	listRV, err := listPages(ctx, c.lw, func(page runtime.Object) {
		list := page.(*agentsv1alpha1.AgentList)
		for i := range list.Items {
			a := &list.Items[i]
			phase := a.Status.Phase
			if phase == "" {
				phase = agentsv1alpha1.PhasePending
			}
			counts[phase]++
			c.storeIfNewer(a)
			keys = append(keys, a.Namespace+"/"+a.Name)
			listed[a.Namespace+"/"+a.Name] = true
		}
	})
	if err != nil {
		return fmt.Errorf("list Agents: %w", err)
	}
	c.evictMissing(listed, listRV)
	c.forgetGone()
	// Jobs too: a run decides from its cached Job while it runs, so a Job
	// watch that missed the end would leave the Agent Running for good.
	jobsErr := c.pollJobs(ctx)
	c.m.SetPhaseCounts(counts)
	c.m.SetStations(c.stationLoads())
	for _, k := range keys {
		c.queue.Add(k)
	}
	return jobsErr
}

// pollJobs refreshes the Job cache from a full paginated LIST of run
// Jobs: a listed Job newer than the cached copy replaces it, and a cached
// Job the LIST no longer holds is dropped when the LIST is newer (its
// deletion was missed; readRun then confirms it live).
func (c *Controller) pollJobs(ctx context.Context) error {
	idx := c.jobs.GetIndexer()
	listed := map[string]bool{}
	refreshed := 0
	listRV, err := listPages(ctx, c.jobLW, func(page runtime.Object) {
		list := page.(*batchv1.JobList)
		for i := range list.Items {
			j := &list.Items[i]
			key := j.Namespace + "/" + j.Name
			listed[key] = true
			old, ok, _ := idx.GetByKey(key)
			if o, isJob := old.(*batchv1.Job); ok && isJob {
				if !rvNewer(j.ResourceVersion, o.ResourceVersion) {
					continue
				}
				if decision.JobFinished(o) != decision.JobFinished(j) {
					refreshed++
				}
			}
			_ = idx.Update(j)
		}
	})
	if err != nil {
		return fmt.Errorf("list Jobs: %w", err)
	}
	for _, obj := range idx.List() {
		j, ok := obj.(*batchv1.Job)
		if !ok || listed[j.Namespace+"/"+j.Name] || !rvNewer(listRV, j.ResourceVersion) {
			continue
		}
		_ = idx.Delete(j)
		refreshed++
	}
	if refreshed > 0 {
		c.log.Info("poll found Jobs ended or gone that the watch had not delivered", "jobs", refreshed)
	}
	return nil
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
