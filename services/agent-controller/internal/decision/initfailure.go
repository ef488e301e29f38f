package decision

import (
	"fmt"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/truncate"
)

// A run whose init container ends non-zero never starts its agent
// container, and its Job only says BackoffLimitExceeded. The supervisor's
// init step prints an init/failed lifecycle line naming the step that
// failed (reason), its exit code and, since it carries one, the step's
// message; the run's failureReason, its Initialized condition and its
// Failed Event say that instead.

// InitFailure is what a finished run's pod says about an init container
// that terminated with a non-zero exit code.
type InitFailure struct {
	// Container is the init container's name.
	Container string
	// ExitCode is its exit code, from the pod's status.
	ExitCode int32
	// Reason is the kubelet's reason for its end (Error, OOMKilled, ...).
	Reason string
	// Step and Message are read from the last init/failed lifecycle line
	// of the container's log (ParseInitFailure): the step that failed
	// (clone, conversation, ...) and why. Empty when the log could not be
	// read, or holds no such line (a cut log, a container killed before
	// it printed one).
	Step    string
	Message string
	// LogErr is set when the container's log could not be read.
	LogErr error
}

// ParseInitFailure returns the step and message of the last init/failed
// lifecycle line of the init container's log; ok is false when it has none.
func ParseInitFailure(log string) (step, message string, ok bool) {
	for _, lc := range initLifecycle(log) {
		if lc.Status == "failed" {
			step, message, ok = lc.Reason, lc.Message, true
		}
	}
	return step, message, ok
}

// maxInitMessage bounds the init step's message in the failure reason;
// the supervisor already bounds it to the same, this guards against any
// other writer of the log.
const maxInitMessage = 1024

// urlUserinfo matches the userinfo of a url (up to its last "@" before the
// path), wherever it is in a text.
var urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#]*@`)

// initMessage makes text from the pod fit a failure reason: one line,
// bounded, valid UTF-8, and without any url's userinfo. The supervisor
// keeps credentials out of its messages (a clone url loses its userinfo
// before git sees it); this holds even if one slipped through.
func initMessage(text string) string {
	text = strings.Join(strings.Fields(strings.ToValidUTF8(text, "")), " ")
	text = urlUserinfo.ReplaceAllString(text, "${1}<redacted>@")
	return truncate.String(text, maxInitMessage)
}

// InitFailureReason is the failure reason of a run whose init container
// failed:
//
//	init step clone failed (exit 14): clone app: git clone exited 128: fatal: ...
//	init step clone failed (exit 14)                        (a line without a message)
//	init container "init" failed (exit 137, OOMKilled)      (the log holds no failed line)
//	init container "init" failed (exit 14); its log could not be read: ...
func InitFailureReason(f *InitFailure) string {
	if f.Step != "" {
		reason := fmt.Sprintf("init step %s failed (exit %d)", initMessage(f.Step), f.ExitCode)
		if msg := initMessage(f.Message); msg != "" {
			reason += ": " + msg
		}
		return reason
	}
	reason := fmt.Sprintf("init container %q failed (exit %d", f.Container, f.ExitCode)
	if f.Reason != "" && f.Reason != "Error" {
		// "Error" is the kubelet's word for any non-zero exit; anything
		// else (OOMKilled, ...) tells more than the exit code.
		reason += ", " + f.Reason
	}
	reason += ")"
	if f.LogErr != nil {
		reason += "; its log could not be read: " + initMessage(f.LogErr.Error())
	}
	return reason
}

// setInitFailedCondition sets Initialized=False on st when the snapshot's
// pod says its init container failed, and returns the failure; nil when it
// did not.
func setInitFailedCondition(st *agentsv1alpha1.AgentStatus, s Snapshot) *InitFailure {
	f := s.Pod.InitFailed
	if f == nil {
		return nil
	}
	setCondition(st, s, agentsv1alpha1.ConditionInitialized, metav1.ConditionFalse, agentsv1alpha1.ReasonInitFailed, InitFailureReason(f))
	return f
}
