package decision

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// owned makes j controlled by a.
func owned(j *batchv1.Job, a *agentsv1alpha1.Agent) *batchv1.Job {
	j.OwnerReferences = []metav1.OwnerReference{{APIVersion: agentsv1alpha1.GroupVersion.String(), Kind: "Agent", Name: a.Name, UID: a.UID, Controller: ptr.To(true)}}
	return j
}

func TestJobChangeMatters(t *testing.T) {
	a := agent("a", agentsv1alpha1.PhaseRunning)
	base := func() *batchv1.Job { return owned(wholeJob(), a) }
	cases := []struct {
		rule   string
		change func(j *batchv1.Job)
		want   bool
	}{
		{"a counter the decision does not read (active pods) is no pass", func(j *batchv1.Job) { j.Status.Active = 1 }, false},
		{"uncounted terminated pods are no pass", func(j *batchv1.Job) {
			j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"p"}}
		}, false},
		{"the Job completing is a pass", func(j *batchv1.Job) { j.Status.Conditions = []batchv1.JobCondition{complete} }, true},
		{"the Job failing is a pass", func(j *batchv1.Job) { j.Status.Conditions = []batchv1.JobCondition{failed} }, true},
		{"succeeded pods with a completion time (no condition yet) is a pass", func(j *batchv1.Job) {
			j.Status.Succeeded, j.Status.CompletionTime = 1, &metav1.Time{Time: t0}
		}, true},
		{"its pod becoming ready is no pass when the run restores nothing", func(j *batchv1.Job) { j.Status.Ready = ptr.To[int32](1) }, false},
		{"its deletion starting is a pass", func(j *batchv1.Job) { j.DeletionTimestamp = &metav1.Time{Time: t0} }, true},
		{"another controller taking it is a pass", func(j *batchv1.Job) { j.OwnerReferences[0].UID = "someone-else" }, true},
		{"losing its controller is a pass", func(j *batchv1.Job) { j.OwnerReferences = nil }, true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			old, updated := base(), base()
			tc.change(updated)
			if got := JobChangeMatters(RunJobOf(old), RunJobOf(updated)); got != tc.want {
				t.Errorf("JobChangeMatters = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("its pod becoming ready is a pass when the run restores a conversation (the early restore read)", func(t *testing.T) {
		old, updated := owned(restoreJob("conv-1", "agentdefinition"), a), owned(restoreJob("conv-1", "agentdefinition"), a)
		updated.Status.Ready = ptr.To[int32](1)
		if !JobChangeMatters(RunJobOf(old), RunJobOf(updated)) {
			t.Error("JobChangeMatters = false, want true")
		}
	})
}

func TestPollPasses(t *testing.T) {
	running := agent("a", agentsv1alpha1.PhaseRunning)
	deleting := agent("a", agentsv1alpha1.PhaseRunning)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	restoring := owned(restoreJob("conv-1", "agentdefinition"), running)
	restoring.Status.Ready = ptr.To[int32](1)
	cleanupDue := batchRunning("a")
	cleanupDue.Status.Phase = agentsv1alpha1.PhaseSucceeded
	cleanupDue.Finalizers = []string{agentsv1alpha1.BatchCleanupFinalizer}
	cases := []struct {
		rule  string
		agent *agentsv1alpha1.Agent
		job   *batchv1.Job
		want  bool
	}{
		{"a Pending run is looked at (a slot may have freed)", agent("a", agentsv1alpha1.PhasePending), nil, true},
		{"a new run is looked at", agent("a", ""), nil, true},
		{"a finished run is not", agent("a", agentsv1alpha1.PhaseSucceeded), nil, false},
		{"a finished batch run whose batch must be cleaned up is", cleanupDue, nil, true},
		{"a run being deleted is not", deleting, nil, false},
		{"a Running run whose Job goes on is not (its Job's change brings it back)", running, owned(wholeJob(), running), false},
		{"a Running run whose Job the cache lacks is (the pass confirms it live)", running, nil, true},
		{"a Running run whose cached Job is another Agent's is", running, wholeJob(), true},
		{"a Running run whose Job finished is", running, owned(wholeJob(complete), running), true},
		{"a Running run whose ready pod's restore is still to be read is", running, restoring, true},
		{"a Running batch run is looked at (its batch is asked on schedule)", batchRunning("a"), nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			if got := PollPasses(tc.agent, cached(tc.job)); got != tc.want {
				t.Errorf("PollPasses = %v, want %v", got, tc.want)
			}
		})
	}
}
