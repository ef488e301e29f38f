package controller

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// jobGone reports whether the Job is deleted (or being deleted by the
// garbage collector's foreground pass).
func jobGone(t *testing.T, ns, name string) bool {
	t.Helper()
	j, err := env.Kube.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return j.DeletionTimestamp != nil
}

// TestAJobThatAlreadyExistsIsTheRunsJob: a pass that finds its Job already
// created (the previous pass created it and lost its status write) takes
// that Job as the run's rather than failing or creating a second one.
func TestAJobThatAlreadyExistsIsTheRunsJob(t *testing.T) {
	ns := env.Namespace(t)
	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "again", "st")
	a := getAgent(t, ns, "again")
	existing := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "agent-job-again", Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: agentsv1alpha1.GroupVersion.String(), Kind: "Agent", Name: a.Name, UID: a.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "agent", Image: "runner"}}}}}}
	created, err := env.Kube.BatchV1().Jobs(ns).Create(context.Background(), existing, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, ns)
	a = waitPhase(t, ns, "again", agentsv1alpha1.PhaseRunning)
	if a.Status.JobName != "agent-job-again" {
		t.Fatalf("jobName %q", a.Status.JobName)
	}
	jobs, err := env.Kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 1 || jobs.Items[0].UID != created.UID {
		t.Fatalf("want the one existing Job, got %d Jobs (%v)", len(jobs.Items), err)
	}
}

// TestAJobGoesWithItsAgent: deleting an Agent deletes its Job (and so its
// pod) through the owner reference, whatever the Agent's phase.
func TestAJobGoesWithItsAgent(t *testing.T) {
	ns := env.Namespace(t)
	start(t, ns)
	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "bye", "st")
	waitPhase(t, ns, "bye", agentsv1alpha1.PhaseRunning)
	if err := env.Client.Delete(context.Background(), &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "bye", Namespace: ns}},
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Job deleted with its Agent", func() bool { return jobGone(t, ns, "agent-job-bye") })
}

// TestPruningTakesTheRunsJobs: history pruning deletes old Agents, and
// their Jobs go with them.
func TestPruningTakesTheRunsJobs(t *testing.T) {
	ns := env.Namespace(t)
	start(t, ns)
	mkStation(t, ns, "st", func(s *agentsv1alpha1.StationSpec) { s.SuccessfulRunsHistoryLimit = ptr.To[int32](1) })
	for _, name := range []string{"old", "new"} {
		mkAgent(t, ns, name, "st")
		waitPhase(t, ns, name, agentsv1alpha1.PhaseRunning)
		finishPod(t, ns, "agent-job-"+name, 0)
		waitPhase(t, ns, name, agentsv1alpha1.PhaseSucceeded)
	}
	eventually(t, "the pruned run's Job deleted", func() bool { return getAgent(t, ns, "old") == nil && jobGone(t, ns, "agent-job-old") })
	if jobGone(t, ns, "agent-job-new") {
		t.Fatal("the kept run lost its Job")
	}
}
