package decision

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// wholeControlledBy returns a Job of the run's name whose controller is
// the given kind, name and uid ("" kind: no owner at all).
func wholeControlledBy(kind, name string, uid types.UID, conds ...batchv1.JobCondition) *batchv1.Job {
	j := wholeJob(conds...)
	if kind != "" {
		j.OwnerReferences = []metav1.OwnerReference{{APIVersion: agentsv1alpha1.GroupVersion.String(), Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	return j
}

// controlledBy is what the controller holds of wholeControlledBy's Job.
func controlledBy(kind, name string, uid types.UID, conds ...batchv1.JobCondition) *RunJob {
	return RunJobOf(wholeControlledBy(kind, name, uid, conds...))
}

func TestIdentityChecks(t *testing.T) {
	a := agent("a", "")
	ours := controlledBy("Agent", "a", a.UID)
	ours.UID = "job-uid"
	pod := func(controller *metav1.OwnerReference) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-job-a-x", Namespace: "ns", Labels: map[string]string{batchv1.JobNameLabel: "agent-job-a"}}}
		if controller != nil {
			p.OwnerReferences = []metav1.OwnerReference{*controller}
		}
		return p
	}
	jobRef := func(uid types.UID) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "agent-job-a", UID: uid, Controller: ptr.To(true)}
	}
	notController := jobRef("job-uid")
	notController.Controller = nil
	cases := []struct {
		rule string
		got  bool
		want bool
	}{
		{"a Job controlled by the Agent's uid is the run's", IsRunJob(ours, a), true},
		{"a Job without an owner is not the run's", IsRunJob(controlledBy("", "", ""), a), false},
		{"a Job controlled by a deleted Agent of the same name is not the run's", IsRunJob(controlledBy("Agent", "a", "old-uid"), a), false},
		{"a Job merely owned (not controlled) by the Agent is not the run's", IsRunJob(func() *RunJob {
			j := wholeControlledBy("Agent", "a", a.UID)
			j.OwnerReferences[0].Controller = nil
			return RunJobOf(j)
		}(), a), false},
		{"a pod controlled by the Job's uid is the run's", IsRunPod(pod(jobRef("job-uid")), ours), true},
		{"a pod with the Job's label and no owner is not the run's", IsRunPod(pod(nil), ours), false},
		{"a pod controlled by another Job of the same name is not the run's", IsRunPod(pod(jobRef("other-uid")), ours), false},
		{"a pod merely owned by the Job is not the run's", IsRunPod(pod(notController), ours), false},
		{"a deleted Agent's Job is its successor's predecessor", predecessorOf(controlledBy("Agent", "a", "old-uid"), a), true},
		{"a Job controlled by an Agent of another name is no predecessor", predecessorOf(controlledBy("Agent", "b", "old-uid"), a), false},
		{"a Job controlled by another kind of the same name is no predecessor", predecessorOf(controlledBy("CronJob", "a", "old-uid"), a), false},
		{"a Job without an owner is no predecessor", predecessorOf(controlledBy("", "", ""), a), false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if c.got != c.want {
				t.Fatalf("got %v, want %v", c.got, c.want)
			}
		})
	}
}

// TestAJobOfTheRunsNameThatIsNotItsOwnIsNeverAdopted covers the attacks on
// a run's identity: a Job created ahead of the run under its name (no
// owner, or another owner), marked succeeded to fake the result, and a
// same-named Agent re-created while its predecessor's Job still exists.
func TestAJobOfTheRunsNameThatIsNotItsOwnIsNeverAdopted(t *testing.T) {
	forged := func(kind, name string, uid types.UID) func() *RunJob {
		return func() *RunJob { return controlledBy(kind, name, uid, complete) }
	}
	cases := []struct {
		rule  string
		phase agentsv1alpha1.AgentPhase
		taken func() *RunJob
		// wait: the run waits in Pending; otherwise it fails naming the Job.
		wait bool
	}{
		{"Pending: a succeeded Job without an owner fails the run", "", forged("", "", ""), false},
		{"Pending: a succeeded Job controlled by something else fails the run", "", forged("Deployment", "a", "d-uid"), false},
		{"Pending: a succeeded Job controlled by an Agent of another name fails the run", "", forged("Agent", "b", "b-uid"), false},
		{"Pending: a deleted predecessor's Job makes the run wait", agentsv1alpha1.PhasePending, forged("Agent", "a", "old-uid"), true},
		{"Running: a succeeded Job that replaced the run's own fails the run, not succeeds it", agentsv1alpha1.PhaseRunning, forged("", "", ""), false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			s := snap(agent("a", c.phase))
			s.NameTaken = c.taken()
			p := Decide(s)
			if p.CreateJob != nil {
				t.Fatalf("a Job was created over the taken name: %+v", p.CreateJob)
			}
			if c.wait {
				cond := meta.FindStatusCondition(p.Status.Conditions, agentsv1alpha1.ConditionStarted)
				if p.Status.Phase != agentsv1alpha1.PhasePending || cond == nil || cond.Reason != agentsv1alpha1.ReasonWaitingForPreviousJob ||
					!strings.Contains(cond.Message, "agent-job-a") || !strings.Contains(cond.Message, "old-uid") || p.RequeueAfter != PredecessorWait {
					t.Fatalf("want Pending, waiting for the predecessor's Job: %+v", p)
				}
				// Shown once: the next pass writes nothing and looks again.
				s.Agent.Status = *p.Status
				if again := Decide(s); again.Status != nil || again.RequeueAfter != PredecessorWait {
					t.Fatalf("a run already shown waiting was rewritten: %+v", again)
				}
				return
			}
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "Job agent-job-a already exists and is not controlled by this Agent")
			if p.Outcome.Failure != FailureInvalidSpec {
				t.Errorf("kind %s", p.Outcome.Failure)
			}
		})
	}
}

// TestAPredecessorsJobGoneTheRunStarts: once garbage collection removed
// the predecessor's Job, the waiting run creates its own.
func TestAPredecessorsJobGoneTheRunStarts(t *testing.T) {
	s := snap(agent("a", agentsv1alpha1.PhasePending))
	s.NameTaken = controlledBy("Agent", "a", "old-uid")
	s.Agent.Status = *Decide(s).Status
	s.NameTaken = nil
	p := Decide(s)
	if p.CreateJob == nil || p.Status.Phase != agentsv1alpha1.PhaseRunning {
		t.Fatalf("the run did not start once the Job was gone: %+v", p)
	}
}

// TestJobNameTakenAtCreate: a Job the watched cache did not hold (it lacks
// the run pods' label) is found by the create; the plan decided from it
// is the same as from the cache.
func TestJobNameTakenAtCreate(t *testing.T) {
	p := JobNameTaken(snap(agent("a", "")), controlledBy("", "", "", complete))
	wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "not controlled by this Agent")
	if c := meta.FindStatusCondition(p.Status.Conditions, agentsv1alpha1.ConditionResolved); c == nil || c.Reason != agentsv1alpha1.ReasonJobNameTaken {
		t.Fatalf("Resolved condition %+v", c)
	}
}

// TestABatchFallbackNeverAdoptsAJobOfItsName: a batch run that times out
// into a Job checks the name like any other start.
func TestABatchFallbackNeverAdoptsAJobOfItsName(t *testing.T) {
	s := batchSnap(batchRunning("a"), agentsv1alpha1.OnTimeoutFallback)
	s.Agent.Status.BatchFallback = true
	s.Agent.Status.BatchID = "b1"
	s.NameTaken = controlledBy("", "", "", complete)
	p := Decide(s)
	if p.CreateJob != nil {
		t.Fatalf("a fallback Job was created over the taken name")
	}
	wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "not controlled by this Agent")
}
