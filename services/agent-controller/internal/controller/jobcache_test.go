package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
)

// TestTheJobCacheHoldsRunJobs: a run Job reaches the cache, through the
// watch and through the poll's LIST alike, as what the decisions read of
// it (decision.RunJob): its identity, its controller, its run spec's model
// and its execution mode; none of its labels, annotations or
// managedFields.
func TestTheJobCacheHoldsRunJobs(t *testing.T) {
	ns, ctl := idleController(t)
	mkAgent(t, ns, "a", "st")
	a := getAgent(t, ns, "a")
	spec, err := runspec.Encode(&runspec.Spec{Model: "gpt-5-codex", Prompt: "do it"})
	if err != nil {
		t.Fatal(err)
	}
	live := runJob(ns, corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		Containers: []corev1.Container{{Name: agentsv1alpha1.AgentContainerName, Image: "agent",
			Env: []corev1.EnvVar{{Name: "TEAM", Value: "a"}, {Name: runspec.EnvName, Value: spec}}}}})
	live.Spec.ActiveDeadlineSeconds = new(int64(600))
	live.Spec.Template.Labels = map[string]string{agentsv1alpha1.LabelExecution: string(agentsv1alpha1.ExecutionRealtime)}
	live.Annotations = map[string]string{"team": "a"}
	live.OwnerReferences = []metav1.OwnerReference{*controllerRef(a)}
	if err := env.Client.Create(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	check := func(how string) {
		t.Helper()
		obj, ok, _ := ctl.jobs.GetIndexer().GetByKey(ns + "/agent-job-a")
		if !ok {
			t.Fatalf("%s: the Job is not cached", how)
		}
		j, isRunJob := obj.(*decision.RunJob)
		switch {
		case !isRunJob:
			t.Fatalf("%s: the cache holds a %T", how, obj)
		case j.ManagedFields != nil, j.Labels != nil, j.Annotations != nil:
			t.Errorf("%s: the cached Job keeps what no decision reads: %+v", how, j)
		case !j.FrozenSpec || j.Model != "gpt-5-codex", j.Execution != agentsv1alpha1.ExecutionRealtime,
			j.UID != live.UID, j.ResourceVersion == "", metav1.GetControllerOf(j) == nil || metav1.GetControllerOf(j).UID != a.UID:
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
	if err := ctl.jobs.GetIndexer().Update(decision.RunJobOf(stale)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := ctl.poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("through the poll")
}
