package decision

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
)

// TestMetricOutcomes names, rule by rule, what a plan gives the run
// metrics to count (docs/agent-controller.md, "Metrics"): a start by its
// mode, an end with its pod's delivery summary, and nothing else, so that
// the controller, which counts a plan's outcome once its status write
// succeeded, counts each run's start and end once.
func TestMetricOutcomes(t *testing.T) {
	summary := &runspec.Summary{Events: map[string]uint64{"message": 3, "lifecycle": 4}, SinkFailed: 1}
	cases := []struct {
		rule        string
		snap        func() Snapshot
		wantStarted agentsv1alpha1.ExecutionMode // "" when the plan starts no run
		wantEnd     agentsv1alpha1.AgentPhase    // "" when the plan ends none
		wantSummary *runspec.Summary
	}{
		{"a Job run starts under mode job", func() Snapshot { return snap(agent("a", "")) }, agentsv1alpha1.ExecutionJob, "", nil},
		{"a realtime session starts under mode realtime", func() Snapshot { return realtimeSnap(agent("a", "")) }, agentsv1alpha1.ExecutionRealtime, "", nil},
		{"a batch run starts under mode batch when submitted", func() Snapshot { return batchSnap(agent("a", ""), "") }, agentsv1alpha1.ExecutionBatch, "", nil},
		{"a run whose Job exists after a lost patch starts with the patch that lands", func() Snapshot {
			s := snap(agent("a", ""))
			s.PendingWithJob = map[string]bool{"a": true}
			return s
		}, agentsv1alpha1.ExecutionJob, "", nil},
		{"a queued run starts nothing", func() Snapshot {
			s := snap(agent("a", ""))
			s.Station = station(agentsv1alpha1.ForbidConcurrent, 0)
			s.StationRuns = []*agentsv1alpha1.Agent{agent("r", agentsv1alpha1.PhaseRunning)}
			return s
		}, "", "", nil},
		{"a batch run's fallback Job starts no second run", func() Snapshot {
			return batchPendingAt(agentsv1alpha1.OnTimeoutFallback, batchDeadline)
		}, "", "", nil},
		{"a finished Job run ends with its pod's summary", func() Snapshot {
			return jobRun(agentsv1alpha1.PhaseRunning, PodOutcome{Found: true, ExitCode: ptr.To[int32](0), Log: "ok", Summary: summary}, complete)
		}, "", agentsv1alpha1.PhaseSucceeded, summary},
		{"a failed Job run ends with its pod's summary", func() Snapshot {
			return jobRun(agentsv1alpha1.PhaseRunning, PodOutcome{Found: true, ExitCode: ptr.To[int32](3), Summary: summary}, failed)
		}, "", agentsv1alpha1.PhaseFailed, summary},
		{"a run whose pod left no summary ends without one", func() Snapshot {
			return jobRun(agentsv1alpha1.PhaseRunning, PodOutcome{Found: true, ExitCode: ptr.To[int32](0)}, complete)
		}, "", agentsv1alpha1.PhaseSucceeded, nil},
		{"a run still going counts nothing, whatever its pod says", func() Snapshot {
			s := snap(agent("a", agentsv1alpha1.PhaseRunning))
			s.Job = runningJob()
			s.Pod = PodOutcome{Found: true, Summary: summary}
			return s
		}, "", "", nil},
		{"a finished batch run ends without a pod summary", func() Snapshot {
			s := batchSnap(batchRunning("a"), "")
			s.Batch = &BatchOutcome{State: BatchSucceeded, Lines: []string{"x"}}
			return s
		}, "", agentsv1alpha1.PhaseSucceeded, nil},
		{"a run refused before it starts ends without starting", func() Snapshot {
			s := snap(agent("a", ""))
			s.Station = nil
			return s
		}, "", agentsv1alpha1.PhaseFailed, nil},
		{"a pass over a terminal Agent counts nothing again", func() Snapshot {
			return jobRun(agentsv1alpha1.PhaseSucceeded, PodOutcome{Found: true, ExitCode: ptr.To[int32](0), Summary: summary}, complete)
		}, "", "", nil},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			o := Decide(c.snap()).Outcome
			if o.Started != (c.wantStarted != "") || o.Mode != c.wantStarted {
				t.Errorf("started %v under mode %q, want mode %q", o.Started, o.Mode, c.wantStarted)
			}
			if o.Terminal != c.wantEnd {
				t.Errorf("ends in %q, want %q", o.Terminal, c.wantEnd)
			}
			if o.Summary != c.wantSummary {
				t.Errorf("summary %+v, want %+v", o.Summary, c.wantSummary)
			}
		})
	}
}

// TestRunOf names a run as the metrics label it.
func TestRunOf(t *testing.T) {
	// frozen runs a pending Agent under a definition naming model, then
	// gives the Running run only the Job that pass created.
	frozen := func(model string) func(*Snapshot) {
		return func(s *Snapshot) {
			pending := snap(agent("a", ""))
			pending.Definition.Spec.Model = model
			s.Job = RunJobOf(Decide(pending).CreateJob)
			s.Definition = nil // a Running Job run is not given its refs
		}
	}
	cases := []struct {
		rule  string
		phase agentsv1alpha1.AgentPhase
		edit  func(*Snapshot)
		want  Run
	}{
		{"a run starting takes the vendor of its definition's model", "",
			func(s *Snapshot) { s.Definition.Spec.Model = "gpt-5-codex" }, Run{Namespace: "ns", Station: "st", Vendor: "codex"}},
		{"the Agent's own model beats its definition's", "",
			func(s *Snapshot) { s.Agent.Spec.Model = "gemini-2.5-pro" }, Run{Namespace: "ns", Station: "st", Vendor: "gemini"}},
		{"a running Job run takes the vendor of the model frozen into its Job", agentsv1alpha1.PhaseRunning,
			frozen("gemini-2.5-pro"), Run{Namespace: "ns", Station: "st", Vendor: "gemini"}},
		{"without a Job or a definition the default model's vendor", agentsv1alpha1.PhaseRunning,
			func(s *Snapshot) { s.Definition = nil }, Run{Namespace: "ns", Station: "st", Vendor: "claude"}},
		{"an Agent naming no Station has an empty Station", "",
			func(s *Snapshot) { s.Agent.Spec.StationRef = "" }, Run{Namespace: "ns", Station: "", Vendor: "claude"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			s := snap(agent("a", c.phase))
			c.edit(&s)
			if got := RunOf(s); got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestActiveRuns counts a Station's slots as admission does.
func TestActiveRuns(t *testing.T) {
	deleted := agent("gone", agentsv1alpha1.PhaseRunning)
	deleted.DeletionTimestamp = &metav1.Time{Time: t0}
	runs := []*agentsv1alpha1.Agent{
		agent("a", agentsv1alpha1.PhaseRunning), agent("b", agentsv1alpha1.PhaseRunning),
		agent("with-job", agentsv1alpha1.PhasePending), agent("queued", agentsv1alpha1.PhasePending),
		agent("done", agentsv1alpha1.PhaseSucceeded), deleted,
	}
	cases := []struct {
		rule string
		snap Snapshot
		want int
	}{
		{"the poll counts every run holding a slot: Running, Pending with a Job, admitted in flight",
			Snapshot{StationRuns: runs, PendingWithJob: map[string]bool{"with-job": true}, InFlight: 1}, 4},
		{"a run deciding its own admission is left out", Snapshot{Agent: agent("a", agentsv1alpha1.PhaseRunning), StationRuns: runs}, 1},
		{"a Station without runs holds none", Snapshot{}, 0},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if got := ActiveRuns(c.snap); got != c.want {
				t.Fatalf("got %d, want %d", got, c.want)
			}
		})
	}
}
