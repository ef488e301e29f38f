package decision

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// kinds lists a plan's Events as "Type/Reason".
func kinds(evs []Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+"/"+e.Reason)
	}
	return strings.Join(out, " ")
}

// TestEvents names, rule by rule, which transition records which
// Kubernetes Event: the table in docs/agent-controller.md ("Kubernetes
// Events").
func TestEvents(t *testing.T) {
	timedOut := t0.Add(10*time.Minute - 30*time.Second) // batchRunning's startedAt + timeoutMinutes
	finishedRealtime := func() Snapshot {
		s := realtimeSnap(agent("a", ""))
		admitted := Decide(s)
		s.Agent = agent("a", agentsv1alpha1.PhaseRunning)
		j := admitted.CreateJob
		j.Status.Conditions = append(j.Status.Conditions, complete)
		s.Job = RunJobOf(j)
		s.Pod = PodOutcome{Found: true, ExitCode: ptr.To[int32](0),
			Log: `{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"sess-2"}` + "\n"}
		return s
	}
	cases := []struct {
		rule string
		snap func() Snapshot
		// want is the plan's Events as "Type/Reason", in order.
		want  string
		check func(t *testing.T, p Plan)
	}{
		{"a run that waits for a Station slot records Queued", func() Snapshot {
			s := snap(agent("a", ""))
			s.Station = station(agentsv1alpha1.ForbidConcurrent, 0)
			s.StationRuns = []*agentsv1alpha1.Agent{agent("r", agentsv1alpha1.PhaseRunning)}
			return s
		}, "Normal/Queued", func(t *testing.T, p Plan) {
			if !strings.Contains(p.Events[0].Note, "waiting for a free slot of Station st (concurrencyPolicy Forbid)") {
				t.Errorf("note %q", p.Events[0].Note)
			}
		}},
		{"a run already shown queued records Queued no second time", func() Snapshot {
			s := snap(agent("a", ""))
			s.Station = station(agentsv1alpha1.ForbidConcurrent, 0)
			s.StationRuns = []*agentsv1alpha1.Agent{agent("r", agentsv1alpha1.PhaseRunning)}
			s.Agent.Status = *Decide(s).Status
			return s
		}, "", nil},
		{"a Job run's start records one Started, naming its Job and related to it", func() Snapshot { return snap(agent("a", "")) },
			"Normal/Started", func(t *testing.T, p Plan) {
				if r := p.Events[0].Related; r == nil || r.Kind != "Job" || r.Name != "agent-job-a" || r.Namespace != "ns" {
					t.Errorf("Started related %+v", r)
				}
				if p.Events[0].Note != "Job agent-job-a created; the run started 1m0s after the Agent was created" {
					t.Errorf("Started note %q", p.Events[0].Note)
				}
			}},
		{"a run whose Job exists after a lost patch records its start with the patch that lands", func() Snapshot {
			s := snap(agent("a", ""))
			s.PendingWithJob = map[string]bool{"a": true}
			return s
		}, "Normal/Started", nil},
		{"a running Job writes nothing and records nothing", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = runningJob()
			return s
		}, "", nil},
		{"a Job run that succeeds records Succeeded", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(complete)
			s.Pod = PodOutcome{Found: true, ExitCode: ptr.To[int32](0), Log: "ok"}
			return s
		}, "Normal/Succeeded", func(t *testing.T, p Plan) {
			if p.Events[0].Note != "the run succeeded in 30s (exit code 0)" {
				t.Errorf("note %q", p.Events[0].Note)
			}
		}},
		{"a Job run that fails records Failed, a Warning with its failure reason", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(failed)
			s.Pod = PodOutcome{Found: true, ExitCode: ptr.To[int32](3)}
			return s
		}, "Warning/Failed", func(t *testing.T, p Plan) {
			if p.Events[0].Note != p.Status.FailureReason {
				t.Errorf("note %q, want the failure reason %q", p.Events[0].Note, p.Status.FailureReason)
			}
		}},
		{"a Job run whose init step failed records Failed noting the step, its exit code and message", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(backoffLimit)
			s.Pod = PodOutcome{Found: true, InitFailed: &InitFailure{Container: "init", ExitCode: 14, Step: "clone", Message: "clone app: git clone exited 128"}}
			return s
		}, "Warning/Failed", func(t *testing.T, p Plan) {
			if p.Events[0].Note != "init step clone failed (exit 14): clone app: git clone exited 128" {
				t.Errorf("note %q", p.Events[0].Note)
			}
		}},
		{"a run refused before it starts (its Station missing) records Failed with the reason", func() Snapshot {
			s := snap(agent("a", ""))
			s.Station = nil
			return s
		}, "Warning/Failed", func(t *testing.T, p Plan) {
			if p.Events[0].Note != `Station "st" not found` {
				t.Errorf("note %q", p.Events[0].Note)
			}
		}},
		{"Replace: the preempted run's delete records Preempted about it, related to the run it made room for", func() Snapshot {
			s := snap(agent("new", ""))
			s.Station = station(agentsv1alpha1.ReplaceConcurrent, 0)
			old := agent("old", agentsv1alpha1.PhaseRunning)
			old.UID = "u-old"
			s.StationRuns = []*agentsv1alpha1.Agent{old}
			return s
		}, "Normal/Started", func(t *testing.T, p Plan) {
			if len(p.Preempt) != 1 {
				t.Fatalf("victims %+v", p.Preempt)
			}
			v := p.Preempt[0]
			if v.UID != "u-old" || v.Event.Type != corev1.EventTypeNormal || v.Event.Reason != EventPreempted ||
				v.Event.Related == nil || v.Event.Related.Name != "new" || v.Event.Related.Kind != "Agent" {
				t.Errorf("victim %+v", v)
			}
		}},
		{"a batch run's submit records one Started, naming the batch API, related to nothing", func() Snapshot { return batchSnap(agent("a", ""), "") },
			"Normal/Started", func(t *testing.T, p Plan) {
				if p.Events[0].Related != nil || !strings.HasPrefix(p.Events[0].Note, "submitted to the anthropic batch API; the run started ") {
					t.Errorf("Started %+v", p.Events[0])
				}
			}},
		{"a batch run's result records Succeeded", func() Snapshot {
			s := batchSnap(batchRunning("a"), "")
			s.Batch = &BatchOutcome{State: BatchSucceeded, Lines: []string{"{}"}}
			return s
		}, "Normal/Succeeded", nil},
		{"a batch run the vendor failed records Failed with the vendor's message", func() Snapshot {
			s := batchSnap(batchRunning("a"), "")
			s.Batch = &BatchOutcome{State: BatchFailed, FailureMessage: "overloaded"}
			return s
		}, "Warning/Failed", func(t *testing.T, p Plan) {
			if p.Events[0].Note != "overloaded" {
				t.Errorf("note %q", p.Events[0].Note)
			}
		}},
		{"a batch timeout under onTimeout fail records BatchTimeout then Failed", func() Snapshot {
			s := batchSnap(batchRunning("a"), agentsv1alpha1.OnTimeoutFail)
			s.Now = timedOut
			s.Batch = &BatchOutcome{State: BatchPending}
			return s
		}, "Warning/BatchTimeout Warning/Failed", func(t *testing.T, p Plan) {
			if !strings.Contains(p.Events[0].Note, "batch msgbatch_1 timed out after 10 minutes") || p.Events[1].Note != ReasonBatchTimedOut {
				t.Errorf("notes %q, %q", p.Events[0].Note, p.Events[1].Note)
			}
		}},
		{"a batch timeout under onTimeout fallback records BatchTimeout then JobCreated for the fallback Job", func() Snapshot {
			s := batchSnap(batchRunning("a"), agentsv1alpha1.OnTimeoutFallback)
			s.Now = timedOut
			s.Batch = &BatchOutcome{State: BatchPending}
			return s
		}, "Warning/BatchTimeout Normal/JobCreated", nil},
		{"a fallback without a Station slot records BatchTimeout alone", func() Snapshot {
			s := batchSnap(batchRunning("a"), agentsv1alpha1.OnTimeoutFallback)
			s.Now = timedOut
			s.Batch = &BatchOutcome{State: BatchPending}
			s.Station = station(agentsv1alpha1.ForbidConcurrent, 0)
			s.StationRuns = []*agentsv1alpha1.Agent{agent("r", agentsv1alpha1.PhaseRunning)}
			return s
		}, "Warning/BatchTimeout", nil},
		{"the fallback Job created once a slot frees records JobCreated", func() Snapshot {
			a := batchRunning("a")
			a.Status.BatchFallback = true
			return batchSnap(a, agentsv1alpha1.OnTimeoutFallback)
		}, "Normal/JobCreated", nil},
		{"a realtime session's start records Started and SessionStarted", func() Snapshot { return realtimeSnap(agent("a", "")) },
			"Normal/Started Normal/SessionStarted", nil},
		{"a realtime session that cannot start records Failed, no session", func() Snapshot {
			s := realtimeSnap(agent("a", ""))
			s.Config.RealtimeEnabled = false
			return s
		}, "Warning/Failed", nil},
		{"a realtime session's end records SessionEnded, naming its vendor session, then Succeeded", finishedRealtime,
			"Normal/SessionEnded Normal/Succeeded", func(t *testing.T, p Plan) {
				if !strings.HasSuffix(p.Events[0].Note, "its last vendor session is sess-2") {
					t.Errorf("note %q", p.Events[0].Note)
				}
			}},
		{"a note over the API's 1 KiB is cut to it, as valid UTF-8", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = job(batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "Evicted", Message: strings.Repeat("é", 2000)})
			return s
		}, "Warning/Failed", func(t *testing.T, p Plan) {
			if n := p.Events[0].Note; len(n) > MaxEventNote || !utf8.ValidString(n) {
				t.Errorf("note of %d bytes, valid UTF-8 %v", len(n), utf8.ValidString(n))
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			p := Decide(c.snap())
			if got := kinds(p.Events); got != c.want {
				t.Fatalf("events %q, want %q", got, c.want)
			}
			if len(p.Events) > 0 && p.Status == nil {
				t.Fatal("events without the status write they are recorded after")
			}
			for _, e := range p.Events {
				if e.Action == "" || e.Note == "" {
					t.Errorf("event %+v lacks its action or note", e)
				}
			}
			if c.check != nil {
				c.check(t, p)
			}
		})
	}
}

func TestCleanupEvents(t *testing.T) {
	a := batchRunning("a")
	cases := []struct {
		rule     string
		attempts int32
		giveUp   bool
		want     string
		note     string
	}{
		{"a failed attempt that is retried records CleanupFailed, without the attempt count a series would repeat", 2, false,
			"Warning/CleanupFailed", "deleting batch msgbatch_1 at anthropic failed; retrying with backoff: unavailable"},
		{"the last attempt records CleanupGivenUp", agentsv1alpha1.MaxBatchCleanupAttempts, true,
			"Warning/CleanupGivenUp", "gave up deleting batch msgbatch_1 at anthropic after 5 attempts and removed the finalizer; the batch is left at the provider: unavailable"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			e := CleanupEvent(a, c.attempts, c.giveUp, "unavailable")
			if got := kinds([]Event{e}); got != c.want || e.Note != c.note {
				t.Errorf("got %s %q, want %s %q", got, e.Note, c.want, c.note)
			}
		})
	}
}

func TestAgentRefLeavesOutTheResourceVersion(t *testing.T) {
	a := agent("a", "")
	ref := AgentRef(a)
	if ref.ResourceVersion != "" || ref.UID != a.UID || ref.Kind != "Agent" || ref.APIVersion != "agents.re-cinq.com/v1alpha1" {
		t.Errorf("ref %+v: repeats about one Agent must aggregate across its versions", ref)
	}
}
