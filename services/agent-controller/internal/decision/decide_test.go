package decision

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func agent(name string, phase agentsv1alpha1.AgentPhase) *agentsv1alpha1.Agent {
	a := &agentsv1alpha1.Agent{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "u-" + "name", ResourceVersion: "7", CreationTimestamp: metav1.Time{Time: t0.Add(-time.Minute)}},
		Spec:       agentsv1alpha1.AgentSpec{StationRef: "st"},
		Status:     agentsv1alpha1.AgentStatus{Phase: phase},
	}
	if phase == agentsv1alpha1.PhaseRunning {
		a.Status.JobName = "agent-job-" + name
		a.Status.StartedAt = &metav1.Time{Time: t0.Add(-30 * time.Second)}
	}
	return a
}

func station(policy agentsv1alpha1.ConcurrencyPolicy, max int32) *agentsv1alpha1.Station {
	return &agentsv1alpha1.Station{
		ObjectMeta: metav1.ObjectMeta{Name: "st", Namespace: "ns"},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: "def", DeadlineMinutes: 30, MaxConcurrentRuns: max, ConcurrencyPolicy: policy,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "runner"}}}}},
	}
}

func definition() *agentsv1alpha1.AgentDefinition {
	return &agentsv1alpha1.AgentDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "def", Namespace: "ns"},
		Spec:       agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "do it"},
	}
}

// wholeJob is Job "agent-job-a" with conds.
func wholeJob(conds ...batchv1.JobCondition) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "agent-job-a", Namespace: "ns"}, Status: batchv1.JobStatus{Conditions: conds}}
}

// cached is what the controller holds of j; nil when j is.
func cached(j *batchv1.Job) *RunJob {
	if j == nil {
		return nil
	}
	return RunJobOf(j)
}

// runningJob is what the controller holds of a Job with an active pod.
func runningJob() *RunJob {
	j := wholeJob()
	j.Status.Active = 1
	return RunJobOf(j)
}

// job is what the controller holds of wholeJob(conds...).
func job(conds ...batchv1.JobCondition) *RunJob {
	return RunJobOf(wholeJob(conds...))
}

var (
	complete = batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}
	failed   = batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}
	backoff  = batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}
)

func snap(a *agentsv1alpha1.Agent) Snapshot {
	return Snapshot{Now: t0, Agent: a, Station: station("", 0), Definition: definition(), Config: Config{MaxOutputBytes: DefaultMaxOutputBytes}}
}

// jobRun is the snapshot of Agent "a" in phase whose Job carries conds and
// whose pod reads pod.
func jobRun(phase agentsv1alpha1.AgentPhase, pod PodOutcome, conds ...batchv1.JobCondition) Snapshot {
	s := snap(agent("a", phase))
	s.Job = job(conds...)
	s.Pod = pod
	return s
}

// planCase is one rule of Decide: a snapshot and what its plan must hold.
type planCase struct {
	rule  string
	snap  func() Snapshot
	check func(t *testing.T, p Plan)
}

// runPlanCases checks each case's rule against the plan Decide makes of its
// snapshot.
func runPlanCases(t *testing.T, cases []planCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) { c.check(t, Decide(c.snap())) })
	}
}

func TestDecide(t *testing.T) {
	cases := []planCase{
		{"Pending: a missing Station fails the Agent with a reason", func() Snapshot {
			s := snap(agent("a", ""))
			s.Station = nil
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, `Station "st" not found`)
			if p.CreateJob != nil || p.Outcome.Failure != FailureMissingRef || p.Outcome.Duration != 0 {
				t.Errorf("a missing ref creates no Job, is counted as missing_ref and is not timed: %+v", p.Outcome)
			}
		}},
		{"Pending: a missing AgentDefinition fails the Agent the same way", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhasePending))
			s.Definition = nil
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, `AgentDefinition "def"`)
		}},
		{"terminal → terminal is a no-op", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseSucceeded))
			s.Station = nil
			return s
		}, func(t *testing.T, p Plan) {
			if !p.Empty() {
				t.Errorf("want no writes, got %+v", p)
			}
		}},
	}
	runPlanCases(t, cases)
}

func wantTerminal(t *testing.T, p Plan, phase agentsv1alpha1.AgentPhase, exit int32, reason string) {
	t.Helper()
	if p.Status == nil {
		t.Fatalf("no status patch: %+v", p)
	}
	if p.Status.Phase != phase || p.Status.ExitCode == nil || *p.Status.ExitCode != exit {
		t.Errorf("phase %s exit %v, want %s %d", p.Status.Phase, p.Status.ExitCode, phase, exit)
	}
	if reason != "" && !strings.Contains(p.Status.FailureReason, reason) {
		t.Errorf("failureReason %q, want it to contain %q", p.Status.FailureReason, reason)
	}
	if reason == "" && p.Status.FailureReason != "" {
		t.Errorf("unexpected failureReason %q", p.Status.FailureReason)
	}
	if p.Status.CompletedAt == nil || !p.Prune || p.Outcome.Terminal != phase {
		t.Errorf("a terminal patch sets completedAt and asks to prune: %+v", p)
	}
}
