package decision

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
)

// Lines of a run pod's init container log, as the supervisor prints them.
const (
	initStarted   = `{"kind":"lifecycle","phase":"init","status":"started"}`
	initConv      = `{"kind":"lifecycle","phase":"init","status":"running","tool":"conversation"}`
	initSkipped   = `{"kind":"lifecycle","phase":"init","status":"skipped","tool":"conversation","reason":"status-503","message":"conversation \"abc\" could not be restored from https://store/conv: status 503; starting a fresh conversation"}`
	initSucceeded = `{"kind":"lifecycle","phase":"init","status":"succeeded"}`
	initFailed    = `{"kind":"lifecycle","phase":"init","status":"failed","reason":"config","exitCode":16}`
	slogWarn      = `{"time":"2026-11-29T12:00:00Z","level":"WARN","msg":"conversation not restored; starting a fresh conversation","phase":"init","status":"succeeded","cause":"status-503"}`
)

const skipMessage = `conversation "abc" could not be restored from https://store/conv: status 503; starting a fresh conversation`

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

func TestParseRestore(t *testing.T) {
	cases := []struct {
		rule string
		log  string
		want RestoreOutcome
	}{
		{"a skip line makes the restore skipped, with its reason and message",
			lines(initStarted, initConv, slogWarn, initSkipped, initSucceeded),
			RestoreOutcome{Known: true, Skipped: true, Cause: "status-503", Message: skipMessage}},
		{"an init that succeeded without a skip line restored the conversation",
			lines(initStarted, initConv, initSucceeded), RestoreOutcome{Known: true}},
		{"a skip line counts even when a later step failed the init",
			lines(initStarted, initSkipped, initFailed), RestoreOutcome{Known: true, Skipped: true, Cause: "status-503", Message: skipMessage}},
		{"an init that failed without a skip line tells nothing", lines(initStarted, initConv, initFailed), RestoreOutcome{}},
		{"a log without the init's end tells nothing", lines(initStarted, initConv), RestoreOutcome{}},
		{"an empty log tells nothing", "", RestoreOutcome{}},
		{"the supervisor's own log lines are not lifecycle events", lines(initStarted, slogWarn), RestoreOutcome{}},
		{"a skip of another step is not the conversation's",
			lines(`{"kind":"lifecycle","phase":"init","status":"skipped","tool":"skills","reason":"x"}`, initSucceeded), RestoreOutcome{Known: true}},
		{"another phase's success is not the init's", lines(`{"kind":"lifecycle","phase":"agent","status":"succeeded","exitCode":0}`), RestoreOutcome{}},
		{"a line cut at the front of the tail and text that is not JSON are ignored",
			lines(`us":"skipped","tool":"conversation"}`, "plain text", initSucceeded), RestoreOutcome{Known: true}},
		{"the run-event envelope of supervisors before the bare line is read too",
			lines(`{"id":"u-1","run":{"namespace":"ns"},"sequence":"7","kind":"EVENT_KIND_LIFECYCLE","lifecycle":{"phase":"init","status":"skipped","reason":"unreachable","tool":"conversation","message":"m"}}`,
				`{"id":"u-2","run":{"namespace":"ns"},"sequence":"9","kind":"EVENT_KIND_LIFECYCLE","lifecycle":{"phase":"init","status":"succeeded"}}`),
			RestoreOutcome{Known: true, Skipped: true, Cause: "unreachable", Message: "m"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if got := ParseRestore(c.log); got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// restoreJob is a run's Job whose init container restores conversation id
// from source (none when id is empty).
func restoreJob(id, source string, conds ...batchv1.JobCondition) *batchv1.Job {
	j := wholeJob(conds...)
	c := corev1.Container{Name: "init", Env: []corev1.EnvVar{{Name: runspec.EnvAgentName, Value: "a"}}}
	if id != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: runspec.EnvConversationSource, Value: source},
			corev1.EnvVar{Name: runspec.EnvConversationID, Value: id})
	}
	j.Spec.Template.Spec.InitContainers = []corev1.Container{c}
	return j
}

func withRestored(a *agentsv1alpha1.Agent, status metav1.ConditionStatus, reason string) *agentsv1alpha1.Agent {
	meta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: agentsv1alpha1.ConditionConversationRestored,
		Status: status, Reason: reason, Message: "set earlier", LastTransitionTime: metav1.Time{Time: t0}})
	return a
}

func TestReadsInitLog(t *testing.T) {
	running := func() *batchv1.Job {
		j := restoreJob("abc", "https://store/conv")
		j.Status.Active = 1
		return j
	}
	ready := func(j *batchv1.Job) *batchv1.Job { j.Status.Ready = ptr.To[int32](1); return j }
	built := func(a *agentsv1alpha1.Agent, s Snapshot) *batchv1.Job {
		s.Agent = a
		return ready(Decide(s).CreateJob)
	}
	resumed := agent("a", "")
	resumed.Spec.ResumeSession = "sess-1"
	withID := snap(agent("a", ""))
	withID.Definition.Spec.Resources = &agentsv1alpha1.AgentResources{Conversation: &agentsv1alpha1.ConversationSpec{Source: "https://store", ID: "abc"}}
	cases := []struct {
		rule  string
		agent *agentsv1alpha1.Agent
		job   *batchv1.Job
		want  bool
	}{
		{"a finished run that restores a conversation reads it", agent("a", agentsv1alpha1.PhaseRunning), restoreJob("abc", "https://s", complete), true},
		{"a running run reads it once its pod is ready", agent("a", agentsv1alpha1.PhaseRunning), ready(running()), true},
		{"a running run does not read it before its pod is ready", agent("a", agentsv1alpha1.PhaseRunning), running(), false},
		{"a run that restores no conversation never reads it", agent("a", agentsv1alpha1.PhaseRunning), restoreJob("", "", complete), false},
		{"a conversation id without a store restores nothing", agent("a", agentsv1alpha1.PhaseRunning), restoreJob("abc", "", complete), false},
		{"once the condition is set the log is never read for it again",
			withRestored(agent("a", agentsv1alpha1.PhaseRunning), metav1.ConditionFalse, agentsv1alpha1.ReasonRestoreSkipped), restoreJob("abc", "https://s", complete), false},
		{"no Job, no log", agent("a", agentsv1alpha1.PhaseRunning), nil, false},
		{"a resumed realtime session's Job, as built, restores its conversation", agent("a", agentsv1alpha1.PhaseRunning), built(resumed, realtime(resumed)), true},
		{"a Job run with conversation.id, as built, restores its conversation", agent("a", agentsv1alpha1.PhaseRunning), built(agent("a", ""), withID), true},
		{"a Job run without a conversation, as built, restores none", agent("a", agentsv1alpha1.PhaseRunning), built(agent("a", ""), snap(agent("a", ""))), false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if got := ReadsInitLog(c.agent, cached(c.job)); got != c.want {
				t.Fatalf("ReadsInitLog = %v, want %v", got, c.want)
			}
		})
	}
}

func TestConversationRestoredCondition(t *testing.T) {
	skipped := RestoreOutcome{Known: true, Skipped: true, Cause: "status-503", Message: skipMessage}
	restored := RestoreOutcome{Known: true}
	finished := func(a *agentsv1alpha1.Agent, j *batchv1.Job, r RestoreOutcome) Snapshot {
		s := snap(a)
		s.Job = RunJobOf(j)
		s.Pod = PodOutcome{Found: true, ExitCode: ptr.To[int32](0), Log: "ok\n", Restore: r}
		return s
	}
	live := func(a *agentsv1alpha1.Agent, readyPods int32, r RestoreOutcome) Snapshot {
		s := snap(a)
		j := restoreJob("abc", "https://store/conv")
		j.Status.Active, j.Status.Ready = 1, ptr.To(readyPods)
		s.Job = RunJobOf(j)
		s.Pod = PodOutcome{Restore: r}
		return s
	}
	cases := []struct {
		rule string
		snap Snapshot
		// want is the condition's status, reason and message; status ""
		// wants none.
		status         metav1.ConditionStatus
		reason, msg    string
		terminal, none bool
	}{
		{rule: "Job run: a skip line makes the completing write False/RestoreSkipped with the lifecycle's message",
			snap:   finished(agent("a", agentsv1alpha1.PhaseRunning), restoreJob("abc", "https://store/conv", complete), skipped),
			status: metav1.ConditionFalse, reason: agentsv1alpha1.ReasonRestoreSkipped, msg: skipMessage, terminal: true},
		{rule: "Job run: an init that succeeded without a skip line makes it True/Restored",
			snap:   finished(agent("a", agentsv1alpha1.PhaseRunning), restoreJob("abc", "https://store/conv", complete), restored),
			status: metav1.ConditionTrue, reason: agentsv1alpha1.ReasonRestored, msg: `conversation "abc" restored from its store`, terminal: true},
		{rule: "Job run: a failed run still says its conversation was skipped",
			snap:   finished(agent("a", agentsv1alpha1.PhaseRunning), restoreJob("abc", "https://store/conv", backoff), skipped),
			status: metav1.ConditionFalse, reason: agentsv1alpha1.ReasonRestoreSkipped, msg: skipMessage, terminal: true},
		{rule: "a skip without a message still says what happened",
			snap: finished(agent("a", agentsv1alpha1.PhaseRunning), restoreJob("abc", "https://store/conv", complete),
				RestoreOutcome{Known: true, Skipped: true, Cause: "unreachable"}),
			status: metav1.ConditionFalse, reason: agentsv1alpha1.ReasonRestoreSkipped,
			msg: `conversation "abc" could not be restored (unreachable); the run started a fresh conversation`, terminal: true},
		{rule: "the condition never carries the store url's credentials",
			snap: finished(agent("a", agentsv1alpha1.PhaseRunning), restoreJob("abc", "https://user:s3cret@store/conv", complete),
				RestoreOutcome{Known: true, Skipped: true, Cause: "unreachable", Message: "could not reach https://user:s3cret@store/conv/abc:\nrefused"}),
			status: metav1.ConditionFalse, reason: agentsv1alpha1.ReasonRestoreSkipped, msg: "could not reach https://store/conv/abc: refused", terminal: true},
		{rule: "a run that restores no conversation gets no condition",
			snap: finished(agent("a", agentsv1alpha1.PhaseRunning), restoreJob("", "", complete), restored), terminal: true},
		{rule: "an init log that tells nothing sets no condition",
			snap: finished(agent("a", agentsv1alpha1.PhaseRunning), restoreJob("abc", "https://store/conv", complete), RestoreOutcome{}), terminal: true},
		{rule: "the completing write keeps a condition set while the run went on",
			snap:   finished(withRestored(agent("a", agentsv1alpha1.PhaseRunning), metav1.ConditionFalse, agentsv1alpha1.ReasonRestoreSkipped), restoreJob("abc", "https://store/conv", complete), RestoreOutcome{}),
			status: metav1.ConditionFalse, reason: agentsv1alpha1.ReasonRestoreSkipped, msg: "set earlier", terminal: true},
		{rule: "realtime: a ready pod's init log sets the condition while the session goes on",
			snap:   live(agent("a", agentsv1alpha1.PhaseRunning), 1, skipped),
			status: metav1.ConditionFalse, reason: agentsv1alpha1.ReasonRestoreSkipped, msg: skipMessage},
		{rule: "realtime: a restored conversation is said as soon as the pod is ready",
			snap:   live(agent("a", agentsv1alpha1.PhaseRunning), 1, restored),
			status: metav1.ConditionTrue, reason: agentsv1alpha1.ReasonRestored, msg: `conversation "abc" restored from its store`},
		{rule: "realtime: before the pod is ready nothing is written", snap: live(agent("a", agentsv1alpha1.PhaseRunning), 0, skipped), none: true},
		{rule: "realtime: an init log that tells nothing writes nothing", snap: live(agent("a", agentsv1alpha1.PhaseRunning), 1, RestoreOutcome{}), none: true},
		{rule: "realtime: once the condition is set nothing more is written",
			snap: live(withRestored(agent("a", agentsv1alpha1.PhaseRunning), metav1.ConditionTrue, agentsv1alpha1.ReasonRestored), 1, skipped), none: true},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			p := Decide(c.snap)
			if c.none {
				if !p.Empty() {
					t.Fatalf("want no writes, got %+v", p)
				}
				return
			}
			if p.Status == nil {
				t.Fatalf("no status write: %+v", p)
			}
			if c.terminal != (p.Outcome.Terminal != "") || c.terminal != p.Prune {
				t.Fatalf("terminal %q prune %v, want terminal %v", p.Outcome.Terminal, p.Prune, c.terminal)
			}
			if !c.terminal && p.Status.Phase != agentsv1alpha1.PhaseRunning {
				t.Fatalf("phase %s: the condition alone must not move the run", p.Status.Phase)
			}
			cond := meta.FindStatusCondition(p.Status.Conditions, agentsv1alpha1.ConditionConversationRestored)
			if c.status == "" {
				if cond != nil {
					t.Fatalf("unexpected condition %+v", cond)
				}
				return
			}
			if cond == nil || cond.Status != c.status || cond.Reason != c.reason || cond.Message != c.msg {
				t.Fatalf("condition %+v, want %s/%s %q", cond, c.status, c.reason, c.msg)
			}
		})
	}
}
