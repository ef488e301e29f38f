package reconcile

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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

func job(conds ...batchv1.JobCondition) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "agent-job-a", Namespace: "ns"}, Status: batchv1.JobStatus{Conditions: conds}}
}

var (
	complete = batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}
	failed   = batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}
	backoff  = batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}
)

func snap(a *agentsv1alpha1.Agent) Snapshot {
	return Snapshot{Now: t0, Agent: a, Station: station("", 0), Definition: definition(), Config: Config{MaxOutputBytes: DefaultMaxOutputBytes}}
}

func TestLifecycle(t *testing.T) {
	cases := []struct {
		rule  string
		snap  func() Snapshot
		check func(t *testing.T, p Plan)
	}{
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
		{"terminal → terminal is a no-op", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseSucceeded))
			s.Station = nil
			return s
		}, func(t *testing.T, p Plan) {
			if !p.Empty() {
				t.Errorf("want no writes, got %+v", p)
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
		{"a batch definition fails at Pending when the batch component is off", func() Snapshot {
			s := snap(agent("a", ""))
			s.Definition.Spec.Execution = agentsv1alpha1.ExecutionBatch
			return s
		}, func(t *testing.T, p Plan) { wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, ReasonBatchDisabled) }},
		{"a realtime definition fails at Pending when the realtime component is off", func() Snapshot {
			s := snap(agent("a", ""))
			s.Definition.Spec.Execution = agentsv1alpha1.ExecutionRealtime
			return s
		}, func(t *testing.T, p Plan) { wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, ReasonRealtimeDisabled) }},
		{"resumeSession requires realtime execution", func() Snapshot {
			a := agent("a", "")
			a.Spec.ResumeSession = "sess-1"
			return snap(a)
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, ReasonResumeNeedsRealtime)
		}},
		{"realtime: resources.conversation.id is refused with the matching reason", func() Snapshot {
			s := realtime(agent("a", ""))
			s.Definition.Spec.Resources.Conversation.ID = "c1"
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "resources.conversation.id")
		}},
		{"realtime: resumeSession needs resources.conversation.source", func() Snapshot {
			a := agent("a", "")
			a.Spec.ResumeSession = "sess-1"
			s := realtime(a)
			s.Definition.Spec.Resources.Conversation.Source = ""
			return s
		}, func(t *testing.T, p Plan) { wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, ReasonResumeNeedsSource) }},
		{"realtime: a vendor that cannot resume is refused by name", func() Snapshot {
			a := agent("a", "")
			a.Spec.ResumeSession = "sess-1"
			a.Spec.Model = "exec"
			return realtime(a)
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "exec cannot resume a session")
		}},
		{"realtime: a valid realtime run gets a Job labelled realtime", func() Snapshot {
			a := agent("a", "")
			a.Spec.ResumeSession = "sess-1"
			return realtime(a)
		}, func(t *testing.T, p Plan) {
			if p.CreateJob == nil || p.CreateJob.Spec.Template.Labels[agentsv1alpha1.LabelExecution] != "realtime" {
				t.Fatalf("plan %+v", p)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) { c.check(t, Decide(c.snap())) })
	}
}

func realtime(a *agentsv1alpha1.Agent) Snapshot {
	s := snap(a)
	s.Config.RealtimeEnabled = true
	s.Definition.Spec.Execution = agentsv1alpha1.ExecutionRealtime
	s.Definition.Spec.Resources = &agentsv1alpha1.AgentResources{Conversation: &agentsv1alpha1.ConversationSpec{Source: "https://store"}}
	return s
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

func TestConcurrency(t *testing.T) {
	running := func(name string, startedSecondsAgo int) *agentsv1alpha1.Agent {
		a := agent(name, agentsv1alpha1.PhaseRunning)
		a.Status.StartedAt = &metav1.Time{Time: t0.Add(-time.Duration(startedSecondsAgo) * time.Second)}
		a.ResourceVersion = "rv-" + name
		return a
	}
	pending := func(name string) *agentsv1alpha1.Agent {
		a := agent(name, agentsv1alpha1.PhasePending)
		a.ResourceVersion = "rv-" + name
		return a
	}
	cases := []struct {
		rule        string
		policy      agentsv1alpha1.ConcurrencyPolicy
		max         int32
		runs        []*agentsv1alpha1.Agent
		inFlight    int
		wantStart   bool
		wantPreempt []string
		// withJob names the Pending runs whose Job exists already ("new"
		// is the run decided on).
		withJob []string
	}{
		{"Allow with maxConcurrentRuns 0 is unlimited", agentsv1alpha1.AllowConcurrent, 0, []*agentsv1alpha1.Agent{running("r1", 5), running("r2", 5)}, 0, true, nil, nil},
		{"Allow queues in Pending at maxConcurrentRuns", agentsv1alpha1.AllowConcurrent, 2, []*agentsv1alpha1.Agent{running("r1", 5), running("r2", 5)}, 0, false, nil, nil},
		{"Allow admits below maxConcurrentRuns", agentsv1alpha1.AllowConcurrent, 3, []*agentsv1alpha1.Agent{running("r1", 5), running("r2", 5)}, 0, true, nil, nil},
		{"Pending runs without a Job and finished runs do not count", agentsv1alpha1.AllowConcurrent, 1, []*agentsv1alpha1.Agent{agent("p", agentsv1alpha1.PhasePending), agent("s", agentsv1alpha1.PhaseSucceeded)}, 0, true, nil, nil},
		{"admissions not yet in the cache count, so a burst never over-admits", agentsv1alpha1.AllowConcurrent, 2, []*agentsv1alpha1.Agent{running("r1", 5)}, 1, false, nil, nil},
		{"Forbid allows one run whatever maxConcurrentRuns says", agentsv1alpha1.ForbidConcurrent, 5, []*agentsv1alpha1.Agent{running("r1", 5)}, 0, false, nil, nil},
		{"Replace deletes the oldest Running run and starts", agentsv1alpha1.ReplaceConcurrent, 0, []*agentsv1alpha1.Agent{running("young", 5), running("old", 50)}, 0, true, []string{"old", "young"}, nil},
		{"Replace with a free slot deletes nothing", agentsv1alpha1.ReplaceConcurrent, 0, nil, 0, true, nil, nil},
		{"Replace waits when only unseen admissions hold the slot", agentsv1alpha1.ReplaceConcurrent, 0, nil, 1, false, nil, nil},
		{"a Job created before a lost Running patch holds its slot", agentsv1alpha1.AllowConcurrent, 1, []*agentsv1alpha1.Agent{pending("lost-patch")}, 0, false, nil, []string{"lost-patch"}},
		{"a Pending run holding its slot through its Job counts with the Running ones", agentsv1alpha1.AllowConcurrent, 2, []*agentsv1alpha1.Agent{running("r1", 5), pending("lost-patch")}, 0, false, nil, []string{"lost-patch"}},
		{"Replace preempts a Pending run holding its slot through its Job", agentsv1alpha1.ReplaceConcurrent, 0, []*agentsv1alpha1.Agent{pending("lost-patch")}, 0, true, []string{"lost-patch"}, []string{"lost-patch"}},
		{"a run whose own Job exists already goes Running without waiting for a slot", agentsv1alpha1.ForbidConcurrent, 0, []*agentsv1alpha1.Agent{running("r1", 5)}, 0, true, nil, []string{"new"}},
		{"a run whose own Job exists already preempts nothing under Replace", agentsv1alpha1.ReplaceConcurrent, 0, []*agentsv1alpha1.Agent{running("r1", 5)}, 0, true, nil, []string{"new"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			s := snap(agent("new", ""))
			s.Station = station(c.policy, c.max)
			s.StationRuns = append(c.runs, s.Agent)
			s.InFlight = c.inFlight
			for _, name := range c.withJob {
				if s.PendingWithJob == nil {
					s.PendingWithJob = map[string]bool{}
				}
				s.PendingWithJob[name] = true
			}
			p := Decide(s)
			if (p.CreateJob != nil) != c.wantStart {
				t.Fatalf("started %v, want %v (%+v)", p.CreateJob != nil, c.wantStart, p)
			}
			if !c.wantStart && (p.Status == nil || p.Status.Phase != agentsv1alpha1.PhasePending || !p.Outcome.Queued) {
				t.Errorf("a queued run stays Pending with a Queued condition: %+v", p.Status)
			}
			var got []string
			for _, v := range p.Preempt {
				got = append(got, v.Name)
				if v.ResourceVersion != "rv-"+v.Name {
					t.Errorf("victim %s carries no resourceVersion precondition", v.Name)
				}
			}
			if strings.Join(got, ",") != strings.Join(c.wantPreempt, ",") {
				t.Errorf("preempted %v, want %v", got, c.wantPreempt)
			}
		})
	}
}

func TestAQueuedRunIsNotRewrittenEachReconcile(t *testing.T) {
	s := snap(agent("new", ""))
	s.Station = station(agentsv1alpha1.ForbidConcurrent, 0)
	s.StationRuns = []*agentsv1alpha1.Agent{agent("r", agentsv1alpha1.PhaseRunning)}
	first := Decide(s)
	s.Agent.Status = *first.Status
	if again := Decide(s); again.Status != nil {
		t.Fatalf("second reconcile of a queued run wrote %+v", again.Status)
	}
}

func TestPruneVictims(t *testing.T) {
	done := func(name string, phase agentsv1alpha1.AgentPhase, minutesAgo int) *agentsv1alpha1.Agent {
		a := agent(name, phase)
		a.Status.CompletedAt = &metav1.Time{Time: t0.Add(-time.Duration(minutesAgo) * time.Minute)}
		return a
	}
	st := station("", 0)
	st.Spec.SuccessfulRunsHistoryLimit = ptr.To[int32](2)
	st.Spec.FailedRunsHistoryLimit = ptr.To[int32](0)
	other := done("other-station", agentsv1alpha1.PhaseSucceeded, 99)
	other.Spec.StationRef = "elsewhere"
	runs := []*agentsv1alpha1.Agent{
		done("s-new", agentsv1alpha1.PhaseSucceeded, 1), done("s-old", agentsv1alpha1.PhaseSucceeded, 30),
		// 9 minutes ago sorts before 10 minutes ago even though "10" < "9" as text.
		done("s-mid", agentsv1alpha1.PhaseSucceeded, 9), done("s-10", agentsv1alpha1.PhaseSucceeded, 10),
		done("f-1", agentsv1alpha1.PhaseFailed, 1), agent("running", agentsv1alpha1.PhaseRunning), other,
	}
	var got []string
	for _, v := range PruneVictims(st, runs) {
		got = append(got, v.Name)
	}
	if want := "s-10,s-old,f-1"; strings.Join(got, ",") != want {
		t.Fatalf("pruned %v, want %s: keep the newest per phase by completedAt as times, never Running runs or other Stations", got, want)
	}
}

func TestTailOutput(t *testing.T) {
	cases := []struct {
		rule string
		log  string
		max  int
	}{
		{"a short log is kept whole", "hello", 10},
		{"a long log keeps its end", strings.Repeat("x", 1000) + "END", 100},
		{"a cut never splits a UTF-8 character", strings.Repeat("日本", 300), 97},
		{"a tiny cap still returns valid text", strings.Repeat("日", 50), 5},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			got := TailOutput(c.log, c.max)
			if len(got) > c.max || !utf8.ValidString(got) {
				t.Fatalf("%d bytes (max %d), valid %v", len(got), c.max, utf8.ValidString(got))
			}
			if len(c.log) <= c.max && got != c.log {
				t.Fatalf("short log changed")
			}
			if len(c.log) > c.max && !strings.HasSuffix(c.log, got[strings.Index(got, "\n")+1:]) {
				t.Fatalf("not a tail: %q", got)
			}
		})
	}
}

func FuzzTailOutput(f *testing.F) {
	f.Add("héllo wörld", 5)
	f.Fuzz(func(t *testing.T, log string, max int) {
		if max < 0 || max > 1<<20 {
			return
		}
		got := TailOutput(log, max)
		if max > 0 && len(got) > max {
			t.Fatalf("%d > %d", len(got), max)
		}
		if utf8.ValidString(log) && !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 from valid input")
		}
	})
}
