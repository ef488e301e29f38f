package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// forgeJob creates Job name in ns as someone other than the controller
// would: with the given labels and controller owner (nil: none).
func forgeJob(t *testing.T, ns, name string, labels map[string]string, owner *metav1.OwnerReference) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "agent", Image: "runner"}}}}}}
	if owner != nil {
		j.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	j, err := env.Kube.BatchV1().Jobs(ns).Create(context.Background(), j, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// waitJobComplete waits until the real Job controller marks Job name
// Complete.
func waitJobComplete(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, "Job "+name+" Complete", func() bool {
		j, err := env.Kube.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

// TestAJobPreCreatedUnderTheRunsNameNeverFakesItsResult is the attack of a
// namespace user who creates the Job the run will be looked up by
// (agent-job-<agent>) before the controller does, and lets it succeed: the
// Agent must not take that Job, nor its success, as its own; it fails
// naming the Job, whether or not the Job carries the run Jobs' label (the
// controller's cache holds only labelled ones) and whatever it claims to
// be controlled by.
func TestAJobPreCreatedUnderTheRunsNameNeverFakesItsResult(t *testing.T) {
	runLabel := map[string]string{agentsv1alpha1.LabelComponent: agentsv1alpha1.ComponentJob}
	cases := []struct {
		rule   string
		labels map[string]string
		owner  func(ns string) *metav1.OwnerReference
	}{
		{"a Job without an owner or the run label", nil, func(string) *metav1.OwnerReference { return nil }},
		{"a Job without an owner, labelled as a run Job", runLabel, func(string) *metav1.OwnerReference { return nil }},
		{"a Job controlled by an Agent of another name", runLabel, func(ns string) *metav1.OwnerReference {
			mkAgent(t, ns, "decoy", "nowhere")
			d := getAgent(t, ns, "decoy")
			return &metav1.OwnerReference{APIVersion: agentsv1alpha1.GroupVersion.String(), Kind: "Agent", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}
		}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			ns := env.Namespace(t)
			mkStation(t, ns, "st", nil)
			forged := forgeJob(t, ns, "agent-job-victim", c.labels, c.owner(ns))
			finishPod(t, ns, forged.Name, 0)
			waitJobComplete(t, ns, forged.Name)
			start(t, ns)
			mkAgent(t, ns, "victim", "st")
			a := waitPhase(t, ns, "victim", agentsv1alpha1.PhaseFailed)
			if !strings.Contains(a.Status.FailureReason, "Job agent-job-victim already exists and is not controlled by this Agent") {
				t.Fatalf("failureReason %q", a.Status.FailureReason)
			}
			if cond := meta.FindStatusCondition(a.Status.Conditions, agentsv1alpha1.ConditionResolved); cond == nil || cond.Reason != agentsv1alpha1.ReasonJobNameTaken {
				t.Fatalf("Resolved condition %+v", cond)
			}
			if a.Status.JobName != "" || a.Status.Output != "" {
				t.Fatalf("the forged Job was taken as the run's: %+v", a.Status)
			}
		})
	}
}

// TestARecreatedAgentNeverAdoptsItsPredecessorsJob: an Agent deleted and
// created again under the same name, while the first one's Job still
// exists (garbage collection has not removed it yet; a finalizer holds it
// here), waits in Pending rather than adopting it, and starts its own Job
// once the old one is gone.
func TestARecreatedAgentNeverAdoptsItsPredecessorsJob(t *testing.T) {
	ns := env.Namespace(t)
	start(t, ns)
	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "again", "st")
	first := waitPhase(t, ns, "again", agentsv1alpha1.PhaseRunning)
	ctx := context.Background()
	jobs := env.Kube.BatchV1().Jobs(ns)
	const hold = "test.agentplane/hold"
	patch := func(finalizers string) {
		t.Helper()
		if _, err := jobs.Patch(ctx, "agent-job-again", types.MergePatchType, []byte(`{"metadata":{"finalizers":`+finalizers+`}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(`["` + hold + `"]`)
	finishPod(t, ns, "agent-job-again", 0)
	waitJobComplete(t, ns, "agent-job-again")
	if err := env.Client.Delete(ctx, first, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first Agent gone", func() bool { return getAgent(t, ns, "again") == nil })

	mkAgent(t, ns, "again", "st")
	second := getAgent(t, ns, "again")
	eventually(t, "the second Agent waiting for the first one's Job", func() bool {
		a := getAgent(t, ns, "again")
		c := meta.FindStatusCondition(a.Status.Conditions, agentsv1alpha1.ConditionStarted)
		return c != nil && c.Reason == agentsv1alpha1.ReasonWaitingForPreviousJob && strings.Contains(c.Message, string(first.UID))
	})
	// It stays there: never Running on, nor Succeeded from, the old Job.
	time.Sleep(3 * time.Second)
	if a := getAgent(t, ns, "again"); a.Status.Phase != agentsv1alpha1.PhasePending || a.Status.JobName != "" {
		t.Fatalf("the second Agent took its predecessor's Job: %+v", a.Status)
	}

	patch(`null`)
	a := waitPhase(t, ns, "again", agentsv1alpha1.PhaseRunning)
	j, err := jobs.Get(ctx, a.Status.JobName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(j, second) {
		t.Fatalf("the second Agent runs on a Job it does not control: %+v", j.OwnerReferences)
	}
}

// TestAPodTheJobDoesNotControlIsNeverReadBack: a pod that carries the
// run's Job label but is not controlled by the Job (created by anyone who
// may create pods, newer than the real one and claiming another exit code)
// is never what the run's result is read from.
func TestAPodTheJobDoesNotControlIsNeverReadBack(t *testing.T) {
	ns := env.Namespace(t)
	start(t, ns)
	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "run", "st")
	waitPhase(t, ns, "run", agentsv1alpha1.PhaseRunning)
	real := podOf(t, ns, "agent-job-run")
	job, err := env.Kube.BatchV1().Jobs(ns).Get(context.Background(), "agent-job-run", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Creation times count in seconds; the impostors must be the newest.
	time.Sleep(1100 * time.Millisecond)
	for i, owner := range []*metav1.OwnerReference{
		nil,
		{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: "not-the-jobs-uid", Controller: ptr.To(true)},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "impostor-" + string(rune('a'+i)), Namespace: ns,
			Labels: map[string]string{batchv1.JobNameLabel: job.Name, "job-name": job.Name}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "agent", Image: "runner"}}}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		p, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", Image: "runner",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 42, StartedAt: now, FinishedAt: now}}}}
		if _, err := env.Kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	now := metav1.Now()
	real.Status.Phase = corev1.PodFailed
	real.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", Image: "runner",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 7, StartedAt: now, FinishedAt: now}}}}
	if _, err := env.Kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), real, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := waitPhase(t, ns, "run", agentsv1alpha1.PhaseFailed)
	if *a.Status.ExitCode != 7 {
		t.Fatalf("exit code %d read from an impostor pod; the Job's own pod exited 7 (%+v)", *a.Status.ExitCode, a.Status)
	}
}
