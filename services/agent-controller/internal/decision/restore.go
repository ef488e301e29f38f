package decision

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/truncate"
)

// RestoreOutcome is what a run pod's init container log says about the
// restore of the conversation the run continues.
type RestoreOutcome struct {
	// Known is set when the log tells: it holds the skip line, or the init
	// step succeeded without one. A log that was not read, was cut, or ends
	// in a failed init step tells nothing.
	Known bool
	// Skipped is set when the restore was skipped and the run started a
	// fresh conversation; Cause (e.g. "status-503") and Message are the
	// skip's reason and message.
	Skipped bool
	Cause   string
	Message string
}

// lifecycleLine is the part of a line of the init container's stdout read
// here: a lifecycle event, bare ({"kind":"lifecycle","phase":"init",...})
// or, as supervisors before the bare line print it, inside the run-event
// envelope ({"kind":"EVENT_KIND_LIFECYCLE","lifecycle":{"phase":...}}).
// The supervisor's own log lines (stderr, in the same log) have neither.
type lifecycleLine struct {
	Kind string `json:"kind"`
	lifecycleFields
	Lifecycle *lifecycleFields `json:"lifecycle"`
}

type lifecycleFields struct {
	Phase   string `json:"phase"`
	Status  string `json:"status"`
	Tool    string `json:"tool"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// ParseRestore reads the init container's log: a skip of the conversation
// step (init/skipped, tool conversation) makes the restore skipped; an
// init/succeeded without one makes it restored.
func ParseRestore(log string) RestoreOutcome {
	var out RestoreOutcome
	succeeded := false
	for _, lc := range initLifecycle(log) {
		switch {
		case lc.Status == "skipped" && lc.Tool == "conversation":
			out = RestoreOutcome{Known: true, Skipped: true, Cause: lc.Reason, Message: lc.Message}
		case lc.Status == "succeeded":
			succeeded = true
		}
	}
	if !out.Skipped && succeeded {
		out.Known = true
	}
	return out
}

// initLifecycle returns the init phase's lifecycle events in the init
// container's log, in order; every other line is skipped.
func initLifecycle(log string) []lifecycleFields {
	var out []lifecycleFields
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var l lifecycleLine
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		lc := l.lifecycleFields
		switch {
		case l.Lifecycle != nil:
			lc = *l.Lifecycle
		case l.Kind != "lifecycle":
			continue
		}
		if lc.Phase == "init" {
			out = append(out, lc)
		}
	}
	return out
}

// restoreRequest returns the conversation id and store the run's init step
// restores, as frozen into its Job (resources.conversation, or the Agent's
// spec.resumeSession); empty when it restores none.
func restoreRequest(job *RunJob) (id, source string) {
	if job == nil {
		return "", ""
	}
	id, source = job.ConversationID, job.ConversationSource
	if id == "" || source == "" {
		return "", ""
	}
	return id, source
}

// ReadsInitLog reports whether a reconcile of the Running Agent a reads the
// init container's log of job's pod: the run restores a conversation, its
// ConversationRestored condition is not set yet, and the init step is over
// (the Job finished, or its pod is ready: a realtime session runs for
// long, and whether it continues its conversation is worth saying early).
// Once the condition is set the log is never read for it again.
func ReadsInitLog(a *agentsv1alpha1.Agent, job *RunJob) bool {
	if job == nil || meta.FindStatusCondition(a.Status.Conditions, agentsv1alpha1.ConditionConversationRestored) != nil {
		return false
	}
	if id, _ := restoreRequest(job); id == "" {
		return false
	}
	return job.Finished || job.PodReady
}

// maxRestoreMessage bounds the condition's message; the supervisor already
// bounds its own, this guards against any other writer of the log.
const maxRestoreMessage = 2048

// setRestoreCondition sets ConversationRestored on st when the snapshot's
// init log tells how the restore went, and reports whether it did.
func setRestoreCondition(st *agentsv1alpha1.AgentStatus, s Snapshot) bool {
	r := s.Pod.Restore
	if !r.Known || !ReadsInitLog(s.Agent, s.Job) {
		return false
	}
	id, source := restoreRequest(s.Job)
	if !r.Skipped {
		setCondition(st, s, agentsv1alpha1.ConditionConversationRestored, metav1.ConditionTrue, agentsv1alpha1.ReasonRestored,
			fmt.Sprintf("conversation %q restored from its store", id))
		return true
	}
	msg := r.Message
	if msg == "" {
		msg = fmt.Sprintf("conversation %q could not be restored (%s); the run started a fresh conversation", id, r.Cause)
	}
	setCondition(st, s, agentsv1alpha1.ConditionConversationRestored, metav1.ConditionFalse, agentsv1alpha1.ReasonRestoreSkipped,
		conditionMessage(msg, source))
	return true
}

// conditionMessage makes msg fit a condition: one line, bounded, valid
// UTF-8, and without the store url's userinfo, should a pod's log ever
// carry it (the supervisor names the store without it).
func conditionMessage(msg, source string) string {
	if u, err := url.Parse(source); err == nil && u.User != nil {
		msg = strings.ReplaceAll(msg, u.User.String()+"@", "")
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "***")
		}
	}
	msg = strings.Join(strings.Fields(strings.ToValidUTF8(msg, "")), " ")
	return truncate.String(msg, maxRestoreMessage)
}
