package decision

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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
