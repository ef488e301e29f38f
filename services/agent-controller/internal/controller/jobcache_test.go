package controller

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
)

// TestTheJobCacheHoldsTrimmedJobs: a run Job reaches the cache, through
// the watch and through the poll's LIST alike, cut down to what the
// decisions read (decision.TrimJob): no labels (only the server's
// selector reads them), no volumes, no containers, no managedFields; its
// deadline and status kept, and its run spec as an annotation of the
// cached copy.
func TestTheJobCacheHoldsTrimmedJobs(t *testing.T) {
	ns, ctl := idleController(t)
	live := runJob(ns, corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		Containers: []corev1.Container{{Name: agentsv1alpha1.AgentContainerName, Image: "agent",
			Env: []corev1.EnvVar{{Name: "TEAM", Value: "a"}, {Name: runspec.EnvName, Value: "spec"}}}}})
	live.Spec.ActiveDeadlineSeconds = new(int64(600))
	live.Spec.Template.Labels = map[string]string{agentsv1alpha1.LabelExecution: string(agentsv1alpha1.ExecutionJob)}
	if err := env.Client.Create(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	check := func(how string) {
		t.Helper()
		obj, ok, _ := ctl.jobs.GetIndexer().GetByKey(ns + "/agent-job-a")
		if !ok {
			t.Fatalf("%s: the Job is not cached", how)
		}
		j := obj.(*batchv1.Job)
		spec := j.Spec.Template.Spec
		switch {
		case j.ManagedFields != nil, j.Labels != nil, spec.Volumes != nil, spec.RestartPolicy != "", spec.Containers != nil:
			t.Errorf("%s: the cached Job keeps what no decision reads: %+v", how, j)
		case j.Annotations["trim.agents.re-cinq.com/run-spec"] != "spec", j.Spec.Template.Labels[agentsv1alpha1.LabelExecution] != string(agentsv1alpha1.ExecutionJob),
			j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds != 600:
			t.Errorf("%s: the cached Job lost what the decisions read: %+v", how, j)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ctl.jobs.RunWithContext(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for !ctl.jobs.HasSynced() || len(ctl.jobs.GetStore().ListKeys()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the Job informer never cached the Job")
		}
		time.Sleep(20 * time.Millisecond)
	}
	check("through the watch")

	// The poll replaces a cached copy older than the listed one.
	stale := live.DeepCopy()
	stale.ResourceVersion = "1"
	if err := ctl.jobs.GetIndexer().Update(stale); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := ctl.poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("through the poll")
}
