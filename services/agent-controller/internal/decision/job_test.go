package decision

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

func TestJobRuns(t *testing.T) {
	cases := []planCase{
		{"Pending: the Job is built and status goes Running with jobName and startedAt", func() Snapshot { return snap(agent("a", "")) },
			func(t *testing.T, p Plan) {
				if p.CreateJob == nil || p.CreateJob.Name != "agent-job-a" {
					t.Fatalf("no Job: %+v", p)
				}
				if p.Status.Phase != agentsv1alpha1.PhaseRunning || p.Status.JobName != "agent-job-a" || !p.Status.StartedAt.Time.Equal(t0) {
					t.Errorf("status: %+v", p.Status)
				}
				if !p.Outcome.Started || p.Outcome.QueueWait != time.Minute {
					t.Errorf("queue wait is creation → Job: %+v", p.Outcome)
				}
			}},
		{"Pending: an error building the Job fails the Agent instead of leaving it Pending", func() Snapshot {
			s := snap(agent("a", ""))
			s.Station.Spec.Template.Spec.Containers[0].Name = "main"
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, `no container named "agent"`)
		}},
		{"Running: while the Job runs nothing is written", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = runningJob()
			return s
		}, func(t *testing.T, p Plan) {
			if !p.Empty() {
				t.Errorf("want no writes, got %+v", p)
			}
		}},
		{"a lost jobName is re-derived from the Agent name", func() Snapshot {
			a := agent("a", agentsv1alpha1.PhaseRunning)
			a.Status.JobName = ""
			s := snap(a)
			s.Job = job(complete)
			s.Pod = PodOutcome{Found: true}
			return s
		}, func(t *testing.T, p Plan) {
			if p.Status.JobName != "agent-job-a" {
				t.Errorf("jobName %q", p.Status.JobName)
			}
		}},
		{"the output is capped at MAX_OUTPUT_BYTES", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(complete)
			s.Pod = PodOutcome{Found: true, Log: strings.Repeat("é", 1000)}
			s.Config.MaxOutputBytes = 101
			return s
		}, func(t *testing.T, p Plan) {
			if len(p.Status.Output) > 101 || !utf8.ValidString(p.Status.Output) || !strings.HasPrefix(p.Status.Output, "...[truncated") {
				t.Errorf("output %d bytes, valid %v: %q", len(p.Status.Output), utf8.ValidString(p.Status.Output), p.Status.Output)
			}
		}},
		{"resumeSession requires realtime execution", func() Snapshot {
			a := agent("a", "")
			a.Spec.ResumeSession = "sess-1"
			return snap(a)
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, ReasonResumeNeedsRealtime)
		}},
	}
	runPlanCases(t, cases)
}

// TestJobRunEnds checks how a Running job run ends: the phase, exit code and
// failure reason read from the Job's condition and the pod's outcome, the
// Initialized condition only when the init container failed, and history
// pruning on every end (wantTerminal).
func TestJobRunEnds(t *testing.T) {
	const deadline = "DeadlineExceeded: Job was active longer than specified deadline"
	cloneNotFound := "clone app: git clone exited 128: fatal: repository 'https://github.com/o/app.git/' not found"
	cases := []struct {
		rule   string
		job    *RunJob // nil: the Job is gone
		pod    PodOutcome
		phase  agentsv1alpha1.AgentPhase
		exit   int32
		reason string
		init   string                     // the Initialized=False message; "" when init did not fail
		more   func(t *testing.T, p Plan) // further checks, or nil
	}{
		{rule: "success patches Succeeded with exitCode 0 and the output tail", job: job(complete),
			pod: PodOutcome{Found: true, ExitCode: ptr.To[int32](0), Log: "line1\nline2\n"}, phase: agentsv1alpha1.PhaseSucceeded,
			more: func(t *testing.T, p Plan) {
				if p.Status.Output != "line1\nline2\n" || p.Outcome.Duration != 30*time.Second {
					t.Errorf("output %q duration %s", p.Status.Output, p.Outcome.Duration)
				}
			}},
		{rule: "failure patches Failed with the pod's non-zero exitCode, the Job reason and the output", job: job(failed),
			pod: PodOutcome{Found: true, ExitCode: ptr.To[int32](124), Log: "timed out"}, phase: agentsv1alpha1.PhaseFailed, exit: 124, reason: deadline,
			more: func(t *testing.T, p Plan) {
				if p.Status.Output != "timed out" || p.Outcome.Failure != FailureJobFailed {
					t.Errorf("%+v", p)
				}
			}},
		{rule: "a run stopped by the supervisor at its deadline says so", job: job(backoff),
			pod: PodOutcome{Found: true, ExitCode: ptr.To[int32](124), Log: "..."}, phase: agentsv1alpha1.PhaseFailed, exit: 124, reason: ReasonDeadline},
		{rule: "exitCode agrees with the phase: a Failed run whose pod reads 0 reports 1", job: job(backoff),
			pod: PodOutcome{Found: true, ExitCode: ptr.To[int32](0)}, phase: agentsv1alpha1.PhaseFailed, exit: 1, reason: "the run failed with exit code 1"},
		{rule: "exitCode agrees with the phase: a Succeeded run reports 0 whatever the pod says", job: job(complete),
			pod: PodOutcome{Found: true, ExitCode: ptr.To[int32](3)}, phase: agentsv1alpha1.PhaseSucceeded},
		{rule: "pod garbage-collected: a succeeded run records the output-unavailable reason", job: job(complete),
			phase: agentsv1alpha1.PhaseSucceeded, reason: ReasonPodGarbageCollected,
			more: func(t *testing.T, p Plan) {
				if p.Outcome.Failure != FailureOutputUnavailable {
					t.Errorf("kind %s", p.Outcome.Failure)
				}
			}},
		{rule: "pod garbage-collected: a failed run keeps the Job-level failure reason", job: job(failed),
			phase: agentsv1alpha1.PhaseFailed, exit: 1, reason: "DeadlineExceeded"},
		{rule: "pod garbage-collected: a failed run without a Job reason records output unavailable", job: job(backoff),
			phase: agentsv1alpha1.PhaseFailed, exit: 1, reason: ReasonPodGarbageCollected},
		{rule: "a log that cannot be read still ends the run, with the reason", job: job(complete),
			pod: PodOutcome{Found: true, LogErr: errors.New("kubelet unreachable")}, phase: agentsv1alpha1.PhaseSucceeded, reason: "run output unavailable: kubelet unreachable"},
		{rule: "Job garbage-collected first: Failed with the run-record reason",
			phase: agentsv1alpha1.PhaseFailed, exit: 1, reason: ReasonJobGarbageCollected},
		{rule: "init failed: the init step's failed line names the step, its exit code and message", job: job(backoffLimit),
			pod:   PodOutcome{Found: true, InitFailed: &InitFailure{Container: "init", ExitCode: 14, Reason: "Error", Step: "clone", Message: cloneNotFound}},
			phase: agentsv1alpha1.PhaseFailed, exit: 14, reason: "init step clone failed (exit 14): " + cloneNotFound, init: "init step clone failed (exit 14): " + cloneNotFound,
			more: func(t *testing.T, p Plan) {
				if p.Status.Output != "" || p.Outcome.Failure != FailureJobFailed || p.Outcome.ExitCode != 14 {
					t.Errorf("%+v", p)
				}
			}},
		{rule: "init failed: credentials in the step's message are redacted", job: job(backoffLimit),
			pod: PodOutcome{Found: true, InitFailed: &InitFailure{Container: "init", ExitCode: 14,
				Step: "clone", Message: "fatal: unable to access 'https://x-access-token:ghp_s3cret@github.com/o/app.git/'"}},
			phase: agentsv1alpha1.PhaseFailed, exit: 14,
			reason: "init step clone failed (exit 14): fatal: unable to access 'https://<redacted>@github.com/o/app.git/'",
			init:   "init step clone failed (exit 14): fatal: unable to access 'https://<redacted>@github.com/o/app.git/'"},
		{rule: "init failed with an unreadable log: the init container and its exit code are named", job: job(backoffLimit),
			pod: PodOutcome{Found: true, InitFailed: &InitFailure{Container: "init", ExitCode: 14, Reason: "Error",
				LogErr: errors.New("the server rejected our request")}},
			phase: agentsv1alpha1.PhaseFailed, exit: 14,
			reason: `init container "init" failed (exit 14); its log could not be read: the server rejected our request`,
			init:   `init container "init" failed (exit 14); its log could not be read: the server rejected our request`},
		{rule: "init failed without a failed line: the init container, its exit code and the kubelet's reason are named", job: job(backoffLimit),
			pod:   PodOutcome{Found: true, InitFailed: &InitFailure{Container: "init", ExitCode: 137, Reason: "OOMKilled"}},
			phase: agentsv1alpha1.PhaseFailed, exit: 137, reason: `init container "init" failed (exit 137, OOMKilled)`, init: `init container "init" failed (exit 137, OOMKilled)`},
		{rule: "init failed past the Job's deadline: DeadlineExceeded stays the reason, the condition names the step", job: job(failed),
			pod:   PodOutcome{Found: true, InitFailed: &InitFailure{Container: "init", ExitCode: 14, Step: "clone", Message: "signal: terminated"}},
			phase: agentsv1alpha1.PhaseFailed, exit: 1, reason: deadline, init: "init step clone failed (exit 14): signal: terminated"},
		{rule: "main container failed: the Job's BackoffLimitExceeded and the pod's exit code, as before", job: job(backoffLimit),
			pod:   PodOutcome{Found: true, ExitCode: ptr.To[int32](3), Log: "boom\n"},
			phase: agentsv1alpha1.PhaseFailed, exit: 3, reason: "BackoffLimitExceeded: Job has reached the specified backoff limit",
			more: func(t *testing.T, p Plan) {
				if p.Status.Output != "boom\n" || p.Events[0].Note != p.Status.FailureReason {
					t.Errorf("%+v", p)
				}
			}},
		{rule: "init succeeded: the run ends as before, without an Initialized condition", job: job(complete),
			pod: PodOutcome{Found: true, ExitCode: ptr.To[int32](0), Log: "done\n"}, phase: agentsv1alpha1.PhaseSucceeded},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job, s.Pod = c.job, c.pod
			p := Decide(s)
			wantTerminal(t, p, c.phase, c.exit, c.reason)
			if c.init != "" {
				wantInitFailed(t, p, c.init)
			} else if cond := meta.FindStatusCondition(p.Status.Conditions, agentsv1alpha1.ConditionInitialized); cond != nil {
				t.Errorf("an init that did not fail set %+v", cond)
			}
			if c.more != nil {
				c.more(t, p)
			}
		})
	}
}

// backoffLimit is the Job condition of a run whose only pod failed.
var backoffLimit = batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
	Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit"}

// wantInitFailed checks that p says the run's init container failed with
// reason: the condition Initialized=False, reason InitFailed, and the
// Warning Failed Event.
func wantInitFailed(t *testing.T, p Plan, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(p.Status.Conditions, agentsv1alpha1.ConditionInitialized)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != agentsv1alpha1.ReasonInitFailed || c.Message != reason {
		t.Errorf("condition %+v, want Initialized=False, InitFailed, %q", c, reason)
	}
	if len(p.Events) != 1 || p.Events[0].Type != corev1.EventTypeWarning || p.Events[0].Reason != EventFailed || p.Events[0].Note != p.Status.FailureReason {
		t.Errorf("events %+v, want one Warning Failed noting %q", p.Events, p.Status.FailureReason)
	}
}
