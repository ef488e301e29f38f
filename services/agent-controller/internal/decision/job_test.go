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
	cases := []struct {
		rule  string
		snap  func() Snapshot
		check func(t *testing.T, p Plan)
	}{
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
			s.Job = job()
			s.Job.Status.Active = 1
			return s
		}, func(t *testing.T, p Plan) {
			if !p.Empty() {
				t.Errorf("want no writes, got %+v", p)
			}
		}},
		{"Running: success patches Succeeded with exitCode 0 and the output tail", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(complete)
			s.Pod = PodOutcome{Found: true, ExitCode: ptr.To[int32](0), Log: "line1\nline2\n"}
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseSucceeded, 0, "")
			if p.Status.Output != "line1\nline2\n" || p.Outcome.Duration != 30*time.Second {
				t.Errorf("output %q duration %s", p.Status.Output, p.Outcome.Duration)
			}
		}},
		{"Running: failure patches Failed with the pod's non-zero exitCode, the Job reason and the output", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(failed)
			s.Pod = PodOutcome{Found: true, ExitCode: ptr.To[int32](124), Log: "timed out"}
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 124, "DeadlineExceeded: Job was active longer than specified deadline")
			if p.Status.Output != "timed out" || p.Outcome.Failure != FailureJobFailed {
				t.Errorf("%+v", p)
			}
		}},
		{"a run stopped by the supervisor at its deadline says so", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(backoff)
			s.Pod = PodOutcome{Found: true, ExitCode: ptr.To[int32](124), Log: "..."}
			return s
		}, func(t *testing.T, p Plan) { wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 124, ReasonDeadline) }},
		{"exitCode agrees with the phase: a Failed run whose pod reads 0 reports 1", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(backoff)
			s.Pod = PodOutcome{Found: true, ExitCode: ptr.To[int32](0)}
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "the run failed with exit code 1")
		}},
		{"exitCode agrees with the phase: a Succeeded run reports 0 whatever the pod says", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(complete)
			s.Pod = PodOutcome{Found: true, ExitCode: ptr.To[int32](3)}
			return s
		}, func(t *testing.T, p Plan) { wantTerminal(t, p, agentsv1alpha1.PhaseSucceeded, 0, "") }},
		{"pod garbage-collected: a succeeded run records the output-unavailable reason", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(complete)
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseSucceeded, 0, ReasonPodGarbageCollected)
			if p.Outcome.Failure != FailureOutputUnavailable {
				t.Errorf("kind %s", p.Outcome.Failure)
			}
		}},
		{"pod garbage-collected: a failed run keeps the Job-level failure reason", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(failed)
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "DeadlineExceeded")
		}},
		{"pod garbage-collected: a failed run without a Job reason records output unavailable", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(backoff)
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, ReasonPodGarbageCollected)
		}},
		{"a log that cannot be read still ends the run, with the reason", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(complete)
			s.Pod = PodOutcome{Found: true, LogErr: errors.New("kubelet unreachable")}
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseSucceeded, 0, "run output unavailable: kubelet unreachable")
		}},
		{"Job garbage-collected first: Failed with the run-record reason", func() Snapshot {
			return snap(agent("a", agentsv1alpha1.PhaseRunning))
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, ReasonJobGarbageCollected)
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
		{"a terminal transition asks for history pruning", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(complete)
			return s
		}, func(t *testing.T, p Plan) {
			if !p.Prune {
				t.Error("no prune")
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
		{"init failed: the init step's failed line names the step, its exit code and message", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(backoffLimit)
			s.Pod = PodOutcome{Found: true, InitFailed: &InitFailure{Container: "init", ExitCode: 14, Reason: "Error",
				Step: "clone", Message: "clone app: git clone exited 128: fatal: repository 'https://github.com/o/app.git/' not found"}}
			return s
		}, func(t *testing.T, p Plan) {
			want := "init step clone failed (exit 14): clone app: git clone exited 128: fatal: repository 'https://github.com/o/app.git/' not found"
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 14, want)
			wantInitFailed(t, p, want)
			if p.Status.Output != "" || p.Outcome.Failure != FailureJobFailed || p.Outcome.ExitCode != 14 {
				t.Errorf("%+v", p)
			}
		}},
		{"init failed: credentials in the step's message are redacted", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(backoffLimit)
			s.Pod = PodOutcome{Found: true, InitFailed: &InitFailure{Container: "init", ExitCode: 14,
				Step: "clone", Message: "fatal: unable to access 'https://x-access-token:ghp_s3cret@github.com/o/app.git/'"}}
			return s
		}, func(t *testing.T, p Plan) {
			want := "init step clone failed (exit 14): fatal: unable to access 'https://<redacted>@github.com/o/app.git/'"
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 14, want)
			wantInitFailed(t, p, want)
		}},
		{"init failed with an unreadable log: the init container and its exit code are named", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(backoffLimit)
			s.Pod = PodOutcome{Found: true, InitFailed: &InitFailure{Container: "init", ExitCode: 14, Reason: "Error",
				LogErr: errors.New("the server rejected our request")}}
			return s
		}, func(t *testing.T, p Plan) {
			want := `init container "init" failed (exit 14); its log could not be read: the server rejected our request`
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 14, want)
			wantInitFailed(t, p, want)
		}},
		{"init failed without a failed line: the init container, its exit code and the kubelet's reason are named", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(backoffLimit)
			s.Pod = PodOutcome{Found: true, InitFailed: &InitFailure{Container: "init", ExitCode: 137, Reason: "OOMKilled"}}
			return s
		}, func(t *testing.T, p Plan) {
			want := `init container "init" failed (exit 137, OOMKilled)`
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 137, want)
			wantInitFailed(t, p, want)
		}},
		{"init failed past the Job's deadline: DeadlineExceeded stays the reason, the condition names the step", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(failed)
			s.Pod = PodOutcome{Found: true, InitFailed: &InitFailure{Container: "init", ExitCode: 14, Step: "clone", Message: "signal: terminated"}}
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "DeadlineExceeded: Job was active longer than specified deadline")
			wantInitFailed(t, p, "init step clone failed (exit 14): signal: terminated")
		}},
		{"main container failed: the Job's BackoffLimitExceeded and the pod's exit code, as before", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(backoffLimit)
			s.Pod = PodOutcome{Found: true, ExitCode: ptr.To[int32](3), Log: "boom\n"}
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 3, "BackoffLimitExceeded: Job has reached the specified backoff limit")
			if c := meta.FindStatusCondition(p.Status.Conditions, agentsv1alpha1.ConditionInitialized); c != nil {
				t.Errorf("an init that did not fail set %+v", c)
			}
			if p.Status.Output != "boom\n" || p.Events[0].Note != p.Status.FailureReason {
				t.Errorf("%+v", p)
			}
		}},
		{"init succeeded: the run ends as before, without an Initialized condition", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(complete)
			s.Pod = PodOutcome{Found: true, ExitCode: ptr.To[int32](0), Log: "done\n"}
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseSucceeded, 0, "")
			if c := meta.FindStatusCondition(p.Status.Conditions, agentsv1alpha1.ConditionInitialized); c != nil {
				t.Errorf("an init that succeeded set %+v", c)
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
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) { c.check(t, Decide(c.snap())) })
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
