package decision

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// Which changes are worth a pass. The Job controller rewrites a run's Job
// status several times per run (active, ready, uncounted pods, counters,
// conditions) and the poll looks at every Agent each period; a pass that
// can decide nothing new only costs CPU and, at scale, queue time for the
// passes that can. These functions say which changes a decision reads.

// JobChangeMatters reports whether a Job's update from old to updated can
// change a decision about its Agent: its outcome (finished, succeeded, the
// Job-level reason), whether its pod is ready when the run restores a
// conversation (the early restore read of a long-running session), its
// deletion, or which Agent controls it.
func JobChangeMatters(old, updated *RunJob) bool {
	if old == nil || updated == nil {
		return true
	}
	if old.Finished != updated.Finished || old.Succeeded != updated.Succeeded || old.FailReason != updated.FailReason {
		return true
	}
	if id, _ := restoreRequest(updated); id != "" && old.PodReady != updated.PodReady {
		return true
	}
	if (old.DeletionTimestamp == nil) != (updated.DeletionTimestamp == nil) {
		return true
	}
	oc, uc := metav1.GetControllerOf(old), metav1.GetControllerOf(updated)
	return (oc == nil) != (uc == nil) || oc != nil && (oc.UID != uc.UID || oc.Name != uc.Name || oc.Kind != uc.Kind)
}

// PollPasses reports whether the poll should queue a pass over a, whose
// Job the cache holds as job (nil when it holds none). It leaves out the
// Agents a pass would only confirm: a finished run (unless its batch must
// still be cleaned up) and a Running Job run whose cached Job is still
// going, which the Job's own change brings back (the poll refreshes the
// Job cache and queues the owners of the Jobs it found changed). Every
// other Agent, a Pending one waiting for a slot above all, is looked at.
func PollPasses(a *agentsv1alpha1.Agent, job *RunJob) bool {
	if NeedsBatchCleanup(a) {
		return true
	}
	if a.Status.Phase.IsTerminal() || a.DeletionTimestamp != nil {
		return false
	}
	if !NeedsJob(a) || job == nil || !IsRunJob(job, a) {
		return true
	}
	return job.Finished || ReadsInitLog(a, job)
}
