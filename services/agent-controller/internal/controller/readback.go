package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// Reading a started run back: its Job, and once the Job finished (or for
// the conversation restore, while it runs) the pod the Job controls, its
// exit code, its logs and its delivery summary.

// logTailLines bounds how much of the pod log is fetched before capping.
const logTailLines = 10000

// The init container's log is short (a line per step, event and warning);
// its tail holds the conversation step and the init's end. LimitBytes
// counts from the first line of that tail, so it is far above what the
// tail holds: a cut would drop the end, which is the part read.
const (
	initLogTailLines  = 200
	initLogLimitBytes = 1 << 20
)

// readRun fills the Job and, once it finished, the pod outcome; while it
// runs, only the init log's restore outcome when ReadsInitLog asks for it.
// A Job of the run's name that the Agent does not control is only named
// (snap.NameTaken), never read. Reading the pod back is best-effort: any
// failure there still lets the run end.
func (c *Controller) readRun(ctx context.Context, snap *decision.Snapshot) error {
	a := snap.Agent
	name := decision.JobNameOf(a)
	if obj, ok, _ := c.jobs.GetIndexer().GetByKey(a.Namespace + "/" + name); ok {
		// The watched Job is enough while it runs; its finish arrives as an
		// event. Only a Job missing from the cache (or not this run's) is
		// confirmed live, so a lagging cache is never mistaken for a
		// garbage-collected Job.
		if cached, ok := obj.(*decision.RunJob); ok && decision.IsRunJob(cached, a) && !cached.Finished {
			snap.Job = cached
			if decision.ReadsInitLog(a, cached) {
				pod, err := c.readPod(ctx, cached, false, true)
				if err != nil {
					return err
				}
				snap.Pod = pod
			}
			return nil
		}
	}
	live, err := c.kube.BatchV1().Jobs(a.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get Job %s: %w", name, err)
	}
	// Decided on as the cache's Jobs are.
	job := decision.RunJobOf(live)
	if !decision.IsRunJob(job, a) {
		snap.NameTaken = job
		return nil
	}
	snap.Job = job
	finished, initLog := job.Finished, decision.ReadsInitLog(a, job)
	if finished || initLog {
		pod, err := c.readPod(ctx, job, finished, initLog)
		if err != nil {
			return err
		}
		snap.Pod = pod
	}
	return nil
}

// readPod reads the Job's pod back: its agent container's exit code and
// log when agentLog is set (the run finished), and the init container's
// log, for the conversation restore's outcome, when initLog is set. In a
// finished run whose init container failed, that log is read for the
// failed step instead of the agent container's, which never ran. Only a
// pod the Job controls is read: the label the list selects on is anyone's
// to set. A failed pod LIST is an error to retry: only a pod that is
// really gone makes the run lose its output.
func (c *Controller) readPod(ctx context.Context, job *decision.RunJob, agentLog, initLog bool) (decision.PodOutcome, error) {
	list, err := c.kube.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job.Name})
	if err != nil {
		return decision.PodOutcome{}, fmt.Errorf("list the pods of Job %s: %w", job.Name, err)
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		if decision.IsRunPod(&list.Items[i], job) {
			pods = append(pods, &list.Items[i])
		}
	}
	if len(pods) == 0 {
		return decision.PodOutcome{}, nil
	}
	// With backoffLimit 0 there is one pod; take the newest if not.
	sort.Slice(pods, func(i, j int) bool {
		return pods[j].CreationTimestamp.Before(&pods[i].CreationTimestamp)
	})
	pod := pods[0]
	out := decision.PodOutcome{Found: true}
	if agentLog {
		out.InitFailed = failedInit(pod)
		out.Summary = c.runSummary(pod)
	}
	// Only the supervisor's init container prints lifecycle lines.
	failedStep := out.InitFailed != nil && out.InitFailed.Container == jobbuild.InitContainerName
	if initLog || failedStep {
		// Best-effort: an unread log sets no restore condition (the next
		// pass tries again), and a failed init is named from its status.
		raw, err := c.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
			Container: jobbuild.InitContainerName, TailLines: ptr.To[int64](initLogTailLines), LimitBytes: ptr.To[int64](initLogLimitBytes),
		}).DoRaw(ctx)
		switch {
		case err != nil:
			c.log.Debug("init container log not read", "pod", pod.Namespace+"/"+pod.Name, "err", err)
			if failedStep {
				out.InitFailed.LogErr = err
			}
		default:
			if initLog {
				out.Restore = decision.ParseRestore(string(raw))
			}
			if failedStep {
				out.InitFailed.Step, out.InitFailed.Message, _ = decision.ParseInitFailure(string(raw))
			}
		}
	}
	if !agentLog || out.InitFailed != nil {
		// A pod whose init failed never started its agent container: it
		// has no exit code, and reading its log would only fail.
		return out, nil
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == agentsv1alpha1.AgentContainerName && cs.State.Terminated != nil {
			out.ExitCode = ptr.To(cs.State.Terminated.ExitCode)
		}
	}
	// Streamed and cut to what status.output keeps, so a pod that printed
	// gigabytes costs the controller no more memory than a quiet one.
	stream, err := c.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
		Container: agentsv1alpha1.AgentContainerName, TailLines: ptr.To[int64](logTailLines),
	}).Stream(ctx)
	if err != nil {
		out.LogErr = errors.New("reading the agent container log failed: " + err.Error())
		return out, nil
	}
	defer func() { _ = stream.Close() }()
	tail, err := decision.ReadTail(stream, c.opts.Reconcile.MaxOutputBytes)
	if err != nil {
		out.LogErr = errors.New("reading the agent container log failed: " + err.Error())
		return out, nil
	}
	out.Log, out.LogDropped = tail.Text, tail.Dropped
	return out, nil
}

// runSummary adds up the delivery summaries the supervisor left in the
// termination messages of pod's init and agent containers (runspec.Summary):
// a run pod ends before anything scrapes it, so its figures are counted
// from here. A message is the pod's to write, so one that is not a summary
// is ignored; nil when no container left one.
func (c *Controller) runSummary(pod *corev1.Pod) *runspec.Summary {
	var sum *runspec.Summary
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			t := cs.State.Terminated
			if cs.Name != jobbuild.InitContainerName && cs.Name != agentsv1alpha1.AgentContainerName || t == nil || t.Message == "" {
				continue
			}
			s, err := runspec.ParseSummary(t.Message)
			if err != nil {
				c.log.Debug("termination message is not a run summary; ignored", "pod", pod.Namespace+"/"+pod.Name, "container", cs.Name, "err", err)
				continue
			}
			if sum != nil {
				s = sum.Add(s)
			}
			sum = &s
		}
	}
	return sum
}

// failedInit returns the first init container of pod that terminated
// with a non-zero exit code; nil when none did.
func failedInit(pod *corev1.Pod) *decision.InitFailure {
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return &decision.InitFailure{Container: cs.Name, ExitCode: t.ExitCode, Reason: t.Reason}
		}
	}
	return nil
}
