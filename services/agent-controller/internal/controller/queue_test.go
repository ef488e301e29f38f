package controller

import (
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// TestAJobsPassGoesAheadOfWaitingAdmissions: a pass a run's Job brings
// is taken before the passes already waiting, so a finished run's Agent
// follows its Job without queueing behind a burst of new Agents.
func TestAJobsPassGoesAheadOfWaitingAdmissions(t *testing.T) {
	runJob := decision.RunJobOf(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent-job-finished",
		OwnerReferences: []metav1.OwnerReference{{Kind: "Agent", Name: "finished", Controller: ptr.To(true)}}}})
	cases := []struct {
		name  string
		bring func(c *Controller)
	}{
		{"the Job informer's change to a run's Job", func(c *Controller) { c.enqueueOwner(runJob) }},
		{"a run's Job deleted while the watch was away", func(c *Controller) {
			c.enqueueOwner(cache.DeletedFinalStateUnknown{Key: "ns/agent-job-finished", Obj: runJob})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := queueOnly(t)
			const waiting = 100
			for i := range waiting {
				c.queue.Add(fmt.Sprintf("ns/new-%d", i))
			}
			tc.bring(c)
			if n := c.queue.Len(); n != waiting+1 {
				t.Fatalf("%d passes queued, want %d", n, waiting+1)
			}
			if key, _ := c.queue.Get(); key != "ns/finished" {
				t.Errorf("the first pass taken is %q, want ns/finished (the Job's owner)", key)
			}
			if key, _ := c.queue.Get(); key != "ns/new-0" {
				t.Errorf("the next pass taken is %q, want ns/new-0 (the first waiting, in order)", key)
			}
		})
	}
}

// TestANewJobBringsNoPassWhileItsCreatorRuns: a Job that reaches the
// cache while the pass creating it has not yet stored the Agent's status
// brings no pass of its own (that pass decides from the Job it made); any
// other new run Job brings its owner's pass.
func TestANewJobBringsNoPassWhileItsCreatorRuns(t *testing.T) {
	job := decision.RunJobOf(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent-job-new",
		OwnerReferences: []metav1.OwnerReference{{Kind: "Agent", Name: "new", Controller: ptr.To(true)}}}})
	cases := []struct {
		name     string
		creating bool
		passes   int
	}{
		{"a Job this controller's pass is creating brings no pass", true, 0},
		{"a Job no pass here is creating brings its owner's pass", false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := queueOnly(t)
			if tc.creating {
				c.creating.Store("ns/agent-job-new", struct{}{})
			}
			c.enqueueOwnerOfNewJob(job)
			if n := c.queue.Len(); n != tc.passes {
				t.Errorf("%d passes queued, want %d", n, tc.passes)
			}
		})
	}
}

// queueOnly is a Controller of namespace "ns" that is not running, for a
// test that reads what its handlers queue; its queue is shut down when the
// test ends.
func queueOnly(t *testing.T) *Controller {
	t.Helper()
	kc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	c := New(kc, env.Kube, metrics.New(), Options{Namespace: "ns", Log: quiet})
	t.Cleanup(c.queue.ShutDown)
	return c
}
