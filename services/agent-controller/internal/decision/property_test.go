package decision

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// propertyRuns is how many random snapshots TestDecideProperties judges.
const propertyRuns = 20000

// pick returns one of xs.
func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// randomSnapshot builds a snapshot the way the cluster could hold it:
// objects valid per the CRD schemas (enums, minimums), in any state and
// combination, including ones the controller never writes itself.
func randomSnapshot(r *rand.Rand) Snapshot {
	phases := []agentsv1alpha1.AgentPhase{"", agentsv1alpha1.PhasePending, agentsv1alpha1.PhaseRunning,
		agentsv1alpha1.PhaseSucceeded, agentsv1alpha1.PhaseFailed}
	a := agent("a", pick(r, phases...))
	a.Generation = r.Int64N(3) + 1
	a.Spec.Model = pick(r, "", "claude-opus-5-5", "gpt-5-codex", "gemini-2.5-pro", "opencode/x/y")
	if r.IntN(4) == 0 {
		a.Spec.ResumeSession = "sess-1"
	}
	if a.Status.Phase == agentsv1alpha1.PhaseRunning {
		if r.IntN(3) == 0 {
			a.Status.BatchID, a.Status.BatchProvider = "b-1", pick(r, agentsv1alpha1.BatchProviderAnthropic, agentsv1alpha1.BatchProviderOpenAI, agentsv1alpha1.BatchProviderGemini)
			a.Status.JobName = ""
			a.Status.BatchFallback = r.IntN(3) == 0
		}
		if r.IntN(5) == 0 {
			a.Status.StartedAt = nil
		}
	}
	if r.IntN(6) == 0 {
		a.DeletionTimestamp = &metav1.Time{Time: t0}
		a.Finalizers = []string{agentsv1alpha1.BatchCleanupFinalizer}
	}

	s := Snapshot{Now: t0.Add(time.Duration(r.IntN(3*24*60)) * time.Minute), Agent: a,
		Config: Config{MaxOutputBytes: DefaultMaxOutputBytes, BatchEnabled: r.IntN(2) == 0, RealtimeEnabled: r.IntN(2) == 0,
			BatchPoll: time.Duration(r.IntN(120)) * time.Second}}
	if r.IntN(10) != 0 {
		s.Station = station(pick(r, "", agentsv1alpha1.AllowConcurrent, agentsv1alpha1.ForbidConcurrent, agentsv1alpha1.ReplaceConcurrent), int32(r.IntN(4)))
		s.Station.Spec.DeadlineMinutes = int32(r.IntN(120) + 1)
	}
	if r.IntN(10) != 0 {
		d := definition()
		d.Spec.Model = pick(r, "", "claude-opus-5-5", "gpt-5-codex", "gemini-2.5-pro", "opencode/x/y")
		d.Spec.Execution = pick(r, "", agentsv1alpha1.ExecutionJob, agentsv1alpha1.ExecutionBatch, agentsv1alpha1.ExecutionRealtime)
		if r.IntN(2) == 0 {
			d.Spec.Batch = &agentsv1alpha1.BatchSpec{TimeoutMinutes: int32(r.IntN(525600) + 1),
				OnTimeout: pick(r, agentsv1alpha1.OnTimeoutFail, agentsv1alpha1.OnTimeoutFallback)}
		}
		if r.IntN(3) == 0 {
			d.Spec.Resources = &agentsv1alpha1.AgentResources{Conversation: &agentsv1alpha1.ConversationSpec{
				Source: pick(r, "", "https://store"), ID: pick(r, "", "c-1"), Pin: pick(r, "", "p-1")}}
		}
		s.Definition = d
	}
	for i := range r.IntN(6) {
		o := agent(fmt.Sprintf("o%d", i), pick(r, phases...))
		if r.IntN(4) == 0 {
			o.Status.StartedAt = nil
		}
		s.StationRuns = append(s.StationRuns, o)
	}
	if r.IntN(3) == 0 {
		s.StationRuns = append(s.StationRuns, a)
	}
	for _, o := range s.StationRuns {
		if r.IntN(4) == 0 {
			if s.PendingWithJob == nil {
				s.PendingWithJob = map[string]bool{}
			}
			s.PendingWithJob[o.Name] = true
		}
	}
	s.InFlight = r.IntN(3)
	if r.IntN(3) != 0 {
		var conds []batchv1.JobCondition
		// The conditions a Job controller sets before its outcome, and
		// ones not (or no longer) true.
		if r.IntN(3) == 0 {
			conds = append(conds, pick(r,
				batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached"},
				batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "too many"},
				batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionFalse},
				batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionUnknown, Reason: "X"}))
		}
		switch r.IntN(4) {
		case 0:
			c := complete
			c.Reason, c.Message = pick(r, "", "CompletionsReached"), pick(r, "", "Reached expected number of succeeded pods")
			conds = append(conds, c)
		case 1:
			conds = append(conds, failed)
		case 2:
			conds = append(conds, backoff)
		}
		j := wholeJob(conds...)
		j.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Env: []corev1.EnvVar{
			{Name: "AGENT_CONVERSATION_SOURCE", Value: pick(r, "", "https://store")}, {Name: "AGENT_CONVERSATION_ID", Value: pick(r, "", "c-1")}}}}
		j.Status.Ready = ptr.To(int32(r.IntN(2)))
		s.Job = RunJobOf(j)
	}
	if r.IntN(2) == 0 {
		s.Pod = PodOutcome{Found: r.IntN(4) != 0, ExitCode: pick(r, nil, ptr.To[int32](0), ptr.To[int32](3), ptr.To[int32](124)),
			Log: pick(r, "", `{"type":"result","is_error":false,"session_id":"s"}`), LogDropped: int64(r.IntN(2)) * 1000}
		if r.IntN(5) == 0 {
			s.Pod.LogErr = errors.New("no kubelet")
		}
		s.Pod.Restore = RestoreOutcome{Known: r.IntN(2) == 0, Skipped: r.IntN(2) == 0, Cause: "status-503"}
	}
	if r.IntN(2) == 0 {
		s.Batch = &BatchOutcome{State: pick(r, BatchPending, BatchSucceeded, BatchFailed), Lines: []string{`{"type":"result"}`},
			FailureMessage: pick(r, "", "the vendor said no")}
	}
	return s
}

// TestDecideProperties judges Decide over random snapshots on the rules
// that must hold whatever the cluster holds: it never panics, it is a
// function of its snapshot, it never admits a run over its Station's
// limit, and every terminal state it writes explains itself.
func TestDecideProperties(t *testing.T) {
	var limited, failedRuns, succeededRuns int
	for i := range propertyRuns {
		seed := uint64(i)
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		s := randomSnapshot(r)
		var p Plan
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("seed %d: Decide panicked: %v\nsnapshot %+v", seed, v, s)
				}
			}()
			p = Decide(s)
		}()
		if again := Decide(s); !reflect.DeepEqual(p, again) {
			t.Fatalf("seed %d: two decisions on one snapshot differ:\n%+v\n%+v", seed, p, again)
		}
		// A run whose own Job exists holds its slot already: going Running
		// takes no new one.
		admits := (s.Agent.Status.Phase == "" || s.Agent.Status.Phase == agentsv1alpha1.PhasePending) && (p.CreateJob != nil || p.Submit != nil) &&
			!s.PendingWithJob[s.Agent.Name]
		if admits && s.Station != nil {
			if limit := s.Station.Spec.EffectiveMaxConcurrent(); limit > 0 {
				limited++
				busy := len(runningOf(s)) - len(p.Preempt) + s.InFlight
				if busy+1 > limit {
					t.Fatalf("seed %d: admitted over the limit: %d running (after %d preempted) + %d in flight, limit %d",
						seed, len(runningOf(s)), len(p.Preempt), s.InFlight, limit)
				}
			}
		}
		if st := p.Status; st != nil {
			switch st.Phase {
			case agentsv1alpha1.PhaseFailed:
				failedRuns++
				if st.FailureReason == "" || st.ExitCode == nil || *st.ExitCode == 0 || st.CompletedAt == nil {
					t.Fatalf("seed %d: Failed without its reason, a non-zero exit code and completedAt: %+v", seed, st)
				}
			case agentsv1alpha1.PhaseSucceeded:
				succeededRuns++
				if st.ExitCode == nil || *st.ExitCode != 0 || st.CompletedAt == nil {
					t.Fatalf("seed %d: Succeeded without exit code 0 and completedAt: %+v", seed, st)
				}
			}
			if s.Agent.Status.Phase.IsTerminal() && st.Phase != s.Agent.Status.Phase {
				t.Fatalf("seed %d: a terminal phase %s was rewritten to %s", seed, s.Agent.Status.Phase, st.Phase)
			}
		}
		// The metrics count a start and an end once the status write that
		// makes it succeeded, so each comes with that write.
		if o := p.Outcome; o.Started && (p.Status == nil || p.Status.Phase != agentsv1alpha1.PhaseRunning || o.Mode == "") ||
			o.Terminal != "" && (p.Status == nil || p.Status.Phase != o.Terminal) {
			t.Fatalf("seed %d: outcome %+v without the status write that makes it: %+v", seed, o, p.Status)
		}
		// Events are recorded after the status write, so a plan without one
		// has none; each is one the events.k8s.io/v1 API accepts.
		if len(p.Events) > 0 && p.Status == nil {
			t.Fatalf("seed %d: events %+v without a status write", seed, p.Events)
		}
		for _, e := range p.Events {
			if (e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning) || e.Reason == "" || e.Action == "" ||
				len(e.Note) > MaxEventNote || !utf8.ValidString(e.Note) {
				t.Fatalf("seed %d: an event the API refuses: %+v", seed, e)
			}
		}
		if p.RequeueAfter < 0 {
			t.Fatalf("seed %d: negative requeue %v", seed, p.RequeueAfter)
		}
	}
	// The generator must reach the states the rules are about, or the
	// rules above hold vacuously.
	if min(limited, failedRuns, succeededRuns) < propertyRuns/200 {
		t.Fatalf("the generator reached too few cases: %d admissions under a limit, %d Failed, %d Succeeded writes",
			limited, failedRuns, succeededRuns)
	}
	t.Logf("%d snapshots: %d admissions under a limit, %d Failed and %d Succeeded writes", propertyRuns, limited, failedRuns, succeededRuns)
}
