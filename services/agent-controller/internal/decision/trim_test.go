package decision

import (
	"math/rand/v2"
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// builtJob is the Job jobbuild makes for s's run, with a model of its own
// (as when the definition changed after the Job was built) and s.Job's
// status and conditions; nil when s cannot build one.
func builtJob(r *rand.Rand, s Snapshot) *batchv1.Job {
	st, def := s.Station, s.Definition
	if st == nil {
		st = station(agentsv1alpha1.AllowConcurrent, 0)
	}
	if def == nil {
		def = definition()
	}
	st = st.DeepCopy()
	st.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	st.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TEAM", Value: "a"}}
	j, err := jobbuild.Build(jobbuild.Input{Agent: s.Agent, Station: st, Definition: def,
		Model:  pick(r, "claude-opus-5-5", "gpt-5-codex", "gemini-2.5-pro", "opencode/x/y"),
		Config: jobbuild.Config{SupervisorImage: "sup", SupervisorPath: "/sup", NATSURL: pick(r, "", "nats://n:4222"), NATSCredentials: r.IntN(2) == 0}})
	if err != nil {
		return nil
	}
	j.Status = *s.Job.Status.DeepCopy()
	j.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "agent-controller", Operation: metav1.ManagedFieldsOperationUpdate}}
	switch r.IntN(4) {
	case 0:
		j.OwnerReferences = nil
	case 1:
		j.DeletionTimestamp = &metav1.Time{Time: t0}
	}
	return j
}

// TestTrimJobKeepsDecisions checks that a Job cut down by TrimJob decides
// as the whole Job does, over random snapshots whose Jobs jobbuild made:
// the plan, the run's labels, whether the poll passes, whether the init
// log is read, and whether a change from another random Job matters.
func TestTrimJobKeepsDecisions(t *testing.T) {
	var built, realtime, restoring int
	for i := range propertyRuns / 4 {
		seed := uint64(i)
		r := rand.New(rand.NewPCG(seed, 0x7217))
		s := randomSnapshot(r)
		if s.Job == nil {
			continue
		}
		whole := builtJob(r, s)
		if whole == nil {
			continue
		}
		built++
		if whole.Spec.Template.Labels[agentsv1alpha1.LabelExecution] == string(agentsv1alpha1.ExecutionRealtime) {
			realtime++
		}
		if id, _ := restoreRequest(whole); id != "" {
			restoring++
		}
		cut := whole.DeepCopy()
		TrimJob(cut)
		if cut.ManagedFields != nil || cut.Spec.Template.Spec.Volumes != nil || cut.Spec.Template.Spec.Containers != nil || cut.Spec.Template.Spec.InitContainers != nil {
			t.Fatalf("seed %d: TrimJob left what no decision reads: %+v", seed, cut.Spec)
		}
		// The controller dates the run's credentials from the deadline.
		if !reflect.DeepEqual(whole.Spec.ActiveDeadlineSeconds, cut.Spec.ActiveDeadlineSeconds) || whole.Spec.ActiveDeadlineSeconds == nil {
			t.Fatalf("seed %d: the trimmed Job lost its active deadline", seed)
		}
		// The log parser is picked from the model (or command) alone;
		// the rest of the frozen spec is not kept.
		if ws, cs := runSpecOf(whole), runSpecOf(cut); ws == nil || cs == nil ||
			!reflect.DeepEqual(*cs, runspec.Spec{Model: ws.Model, Command: ws.Command}) {
			t.Fatalf("seed %d: the trimmed run spec is not the whole one's model and command: %+v", seed, cs)
		}
		sw, sc := s, s
		sw.Job, sc.Job = whole, cut
		if pw, pc := Decide(sw), Decide(sc); !reflect.DeepEqual(pw, pc) {
			t.Fatalf("seed %d: the trimmed Job decides otherwise:\nwhole   %+v\ntrimmed %+v", seed, pw, pc)
		}
		if rw, rc := RunOf(sw), RunOf(sc); rw != rc {
			t.Fatalf("seed %d: the trimmed Job names another run: %+v, %+v", seed, rw, rc)
		}
		if PollPasses(s.Agent, whole) != PollPasses(s.Agent, cut) || ReadsInitLog(s.Agent, whole) != ReadsInitLog(s.Agent, cut) {
			t.Fatalf("seed %d: the poll or the init log read differs on the trimmed Job", seed)
		}
		other := builtJob(r, randomSnapshotWithJob(r))
		if other == nil {
			continue
		}
		otherCut := other.DeepCopy()
		TrimJob(otherCut)
		if JobChangeMatters(other, whole) != JobChangeMatters(otherCut, cut) {
			t.Fatalf("seed %d: whether a Job change matters differs on the trimmed Jobs", seed)
		}
	}
	if min(built, realtime, restoring) < propertyRuns/400 {
		t.Fatalf("the generator reached too few cases: %d Jobs built, %d realtime, %d restoring", built, realtime, restoring)
	}
}

// randomSnapshotWithJob draws snapshots until one holds a Job.
func randomSnapshotWithJob(r *rand.Rand) Snapshot {
	for {
		if s := randomSnapshot(r); s.Job != nil {
			return s
		}
	}
}

// TestTrimJobTrustsOnlyItsOwnFacts: a Job on the server that carries the
// annotations TrimJob keeps its facts in (set by hand on the Job, whose
// annotations stay mutable while its pod template does not) decides, once
// trimmed, by what TrimJob found in its containers. The controller trims
// every Job it reads, from the cache or live.
func TestTrimJobTrustsOnlyItsOwnFacts(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 0x7217))
	var whole *batchv1.Job
	for whole == nil {
		whole = builtJob(r, randomSnapshotWithJob(r))
	}
	forged := whole.DeepCopy()
	forged.Annotations = map[string]string{
		trimmedMark: "", trimmedRunSpec: "not a spec",
		trimmedConversationID: "c-1", trimmedConversationSource: "redis",
	}
	cases := []struct {
		name string
		job  *batchv1.Job
	}{
		{"the cached copy of a Job with forged facts reads its containers' facts", func() *batchv1.Job { j := forged.DeepCopy(); TrimJob(j); return j }()},
		{"a cached copy trimmed again keeps its facts", func() *batchv1.Job { j := whole.DeepCopy(); TrimJob(j); TrimJob(j); return j }()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws, cs := runSpecOf(whole), runSpecOf(tc.job)
			if ws == nil || cs == nil || ws.Model != cs.Model {
				t.Errorf("run spec %+v, want the model of %+v", cs, ws)
			}
			wi, wsrc := restoreRequest(whole)
			ci, csrc := restoreRequest(tc.job)
			if wi != ci || wsrc != csrc {
				t.Errorf("restores %q from %q, want %q from %q", ci, csrc, wi, wsrc)
			}
		})
	}
}
