package decision

import (
	"math/rand/v2"
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// builtJob is the Job jobbuild makes for s's run with model (as when the
// definition changed after the Job was built), s.Job's outcome, and some
// of what the API server and the Job controller add; nil when s cannot
// build one.
func builtJob(r *rand.Rand, s Snapshot, model string) *batchv1.Job {
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
	j, err := jobbuild.Build(jobbuild.Input{Agent: s.Agent, Station: st, Definition: def, Model: model,
		Config: jobbuild.Config{SupervisorImage: "sup", SupervisorPath: "/sup", NATSURL: pick(r, "", "nats://n:4222"), NATSCredentials: r.IntN(2) == 0}})
	if err != nil {
		return nil
	}
	switch {
	case s.Job.Finished && s.Job.Succeeded:
		j.Status.Conditions = []batchv1.JobCondition{complete}
	case s.Job.Finished:
		j.Status.Conditions = []batchv1.JobCondition{failed}
	default:
		j.Status.Active = 1
	}
	j.Status.Ready = ptr.To(int32(r.IntN(2)))
	j.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "agent-controller", Operation: metav1.ManagedFieldsOperationUpdate}}
	j.OwnerReferences = append(j.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "cm-uid"})
	switch r.IntN(4) {
	case 0:
		j.OwnerReferences = j.OwnerReferences[1:]
	case 1:
		j.DeletionTimestamp = &metav1.Time{Time: t0}
	}
	return j
}

// TestRunJobOfReadsWhatTheBuilderFroze: over random snapshots, the Job
// jobbuild makes for the run is read back (RunJobOf) with the model and
// the conversation the build froze into it, its execution mode, its
// controller (the only owner kept), its deletion and its outcome, and
// none of the rest of its metadata.
func TestRunJobOfReadsWhatTheBuilderFroze(t *testing.T) {
	var built, realtimeRuns, restoring int
	for i := range propertyRuns / 4 {
		seed := uint64(i)
		r := rand.New(rand.NewPCG(seed, 0x7217))
		s := randomSnapshot(r)
		if s.Job == nil {
			continue
		}
		model := pick(r, "claude-opus-5-5", "gpt-5-codex", "gemini-2.5-pro", "opencode/x/y")
		whole := builtJob(r, s, model)
		if whole == nil {
			continue
		}
		built++
		got := RunJobOf(whole)
		def := s.Definition
		if def == nil {
			def = definition()
		}
		wantExecution := agentsv1alpha1.ExecutionMode("")
		if def.Spec.EffectiveExecution() == agentsv1alpha1.ExecutionRealtime {
			wantExecution = agentsv1alpha1.ExecutionRealtime
			realtimeRuns++
		}
		var wantID, wantSource string
		if res := def.Spec.Resources; res != nil && res.Conversation != nil {
			wantID, wantSource = res.Conversation.ID, res.Conversation.Source
		}
		if got.ConversationID != "" && got.ConversationSource != "" {
			restoring++
		}
		switch {
		case !got.FrozenSpec || got.Model != model:
			t.Fatalf("seed %d: frozen spec %v, model %q, want %q", seed, got.FrozenSpec, got.Model, model)
		case got.Execution != wantExecution:
			t.Fatalf("seed %d: execution %q, want %q", seed, got.Execution, wantExecution)
		case wantID != "" && (got.ConversationID != wantID || got.ConversationSource != wantSource):
			t.Fatalf("seed %d: restores %q from %q, want %q from %q", seed, got.ConversationID, got.ConversationSource, wantID, wantSource)
		case got.Finished != s.Job.Finished || got.Succeeded != s.Job.Succeeded || got.PodReady != (*whole.Status.Ready > 0):
			t.Fatalf("seed %d: outcome %+v, want that of %+v", seed, got, s.Job)
		case !reflect.DeepEqual(metav1.GetControllerOf(got), metav1.GetControllerOf(whole)) || len(got.OwnerReferences) > 1:
			t.Fatalf("seed %d: owners %+v, want the controller of %+v", seed, got.OwnerReferences, whole.OwnerReferences)
		case got.DeletionTimestamp != whole.DeletionTimestamp:
			t.Fatalf("seed %d: deletion %v, want %v", seed, got.DeletionTimestamp, whole.DeletionTimestamp)
		case got.Labels != nil || got.Annotations != nil || got.ManagedFields != nil || got.Finalizers != nil:
			t.Fatalf("seed %d: kept metadata no decision reads: %+v", seed, got.ObjectMeta)
		}
	}
	if min(built, realtimeRuns, restoring) < propertyRuns/400 {
		t.Fatalf("the generator reached too few cases: %d Jobs built, %d realtime, %d restoring", built, realtimeRuns, restoring)
	}
}

// TestRunJobOf names each rule of reading a Job's outcome and frozen facts.
func TestRunJobOf(t *testing.T) {
	cond := func(typ batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: status, Reason: reason, Message: message}
	}
	withStatus := func(st batchv1.JobStatus) *batchv1.Job {
		j := wholeJob()
		j.Status = st
		return j
	}
	withAgentEnv := func(container string, env ...corev1.EnvVar) *batchv1.Job {
		j := wholeJob()
		j.Spec.Template.Spec.Containers = []corev1.Container{{Name: container, Env: env}}
		return j
	}
	spec, err := runspec.Encode(&runspec.Spec{Model: "gpt-5-codex", Prompt: "do it"})
	if err != nil {
		t.Fatal(err)
	}
	done := &metav1.Time{Time: t0}
	cases := []struct {
		rule string
		job  *batchv1.Job
		want RunJob
	}{
		{"a true Complete condition: the Job succeeded", withStatus(batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobComplete, corev1.ConditionTrue, "", "")}}),
			RunJob{Finished: true, Succeeded: true}},
		{"a true Failed condition: the Job failed, with its reason and message", withStatus(batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue, "DeadlineExceeded", "too long")}}),
			RunJob{Finished: true, FailReason: "DeadlineExceeded: too long"}},
		{"a Failed condition with a reason only", withStatus(batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue, "BackoffLimitExceeded", "")}}),
			RunJob{Finished: true, FailReason: "BackoffLimitExceeded"}},
		{"a Failed condition with a message only", withStatus(batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue, "", "evicted")}}),
			RunJob{Finished: true, FailReason: "evicted"}},
		{"a condition that is not true says nothing", withStatus(batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionFalse, "X", "y")}}),
			RunJob{}},
		{"the Job controller's earlier conditions say nothing", withStatus(batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, "", ""), cond(batchv1.JobFailureTarget, corev1.ConditionTrue, "", "")}}),
			RunJob{}},
		{"succeeded pods with a completion time and no condition yet: succeeded", withStatus(batchv1.JobStatus{Succeeded: 1, CompletionTime: done}),
			RunJob{Finished: true, Succeeded: true}},
		{"succeeded pods without a completion time: not finished", withStatus(batchv1.JobStatus{Succeeded: 1}), RunJob{}},
		{"an active pod: not finished, whatever the counters", withStatus(batchv1.JobStatus{Active: 1, Succeeded: 1, CompletionTime: done}), RunJob{}},
		{"a ready pod counted: the pod is ready", withStatus(batchv1.JobStatus{Active: 1, Ready: ptr.To[int32](1)}), RunJob{PodReady: true}},
		{"no ready pod counted: the pod is not ready", withStatus(batchv1.JobStatus{Active: 1, Ready: ptr.To[int32](0)}), RunJob{}},
		{"the agent container's run spec: its model", withAgentEnv(agentsv1alpha1.AgentContainerName, corev1.EnvVar{Name: runspec.EnvName, Value: spec}),
			RunJob{FrozenSpec: true, Model: "gpt-5-codex"}},
		{"a run spec that does not decode: no frozen spec", withAgentEnv(agentsv1alpha1.AgentContainerName, corev1.EnvVar{Name: runspec.EnvName, Value: "not a spec"}),
			RunJob{}},
		{"a run spec in another container is not the run's", withAgentEnv("sidecar", corev1.EnvVar{Name: runspec.EnvName, Value: spec}), RunJob{}},
		{"the init container's conversation", func() *batchv1.Job {
			j := wholeJob()
			j.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: jobbuild.InitContainerName, Env: []corev1.EnvVar{
				{Name: runspec.EnvConversationID, Value: "c-1"}, {Name: runspec.EnvConversationSource, Value: "redis://store"}}}}
			return j
		}(), RunJob{ConversationID: "c-1", ConversationSource: "redis://store"}},
		{"a conversation set on another container is not restored", func() *batchv1.Job {
			j := wholeJob()
			j.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "other", Env: []corev1.EnvVar{{Name: runspec.EnvConversationID, Value: "c-1"}}}}
			return j
		}(), RunJob{}},
		{"a realtime session's pod template label: its execution mode", func() *batchv1.Job {
			j := wholeJob()
			j.Spec.Template.Labels = map[string]string{agentsv1alpha1.LabelExecution: string(agentsv1alpha1.ExecutionRealtime), "team": "a"}
			return j
		}(), RunJob{Execution: agentsv1alpha1.ExecutionRealtime}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			got := RunJobOf(c.job)
			got.ObjectMeta = metav1.ObjectMeta{}
			if !reflect.DeepEqual(*got, c.want) {
				t.Errorf("RunJobOf = %+v, want %+v", *got, c.want)
			}
		})
	}
}

// TestRunJobDeepCopy: a copy shares nothing a caller may change.
func TestRunJobDeepCopy(t *testing.T) {
	j := controlledBy("Agent", "a", "uid-a", complete)
	c := j.DeepCopyObject().(*RunJob)
	c.OwnerReferences[0].Name = "b"
	*c.OwnerReferences[0].Controller = false
	if !reflect.DeepEqual(j, controlledBy("Agent", "a", "uid-a", complete)) {
		t.Fatalf("changing the copy changed the original: %+v", j)
	}
}
