package controller

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

// initLogs plays the kubelet's part for the init container's log, which
// the test's API server cannot serve (for a pod on no node it answers an
// empty log): a GET of the init container's log of a pod whose name starts
// with logPod is answered with log, of one whose name starts with
// brokenPod with a server error. Everything else goes to the real server.
type initLogs struct {
	next              http.RoundTripper
	logPod, brokenPod string
	log               string
}

func (f *initLogs) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/log") || req.URL.Query().Get("container") != jobbuild.InitContainerName {
		return f.next.RoundTrip(req)
	}
	answer := func(code int, body string) *http.Response {
		return &http.Response{StatusCode: code, Status: http.StatusText(code),
			Header: http.Header{"Content-Type": []string{"text/plain"}}, Body: io.NopCloser(strings.NewReader(body)), Request: req}
	}
	switch {
	case strings.Contains(req.URL.Path, "/pods/"+f.logPod):
		return answer(http.StatusOK, f.log), nil
	case strings.Contains(req.URL.Path, "/pods/"+f.brokenPod):
		return answer(http.StatusInternalServerError, "kubelet unreachable"), nil
	}
	return f.next.RoundTrip(req)
}

// failInit plays the kubelet's part for a pod whose init container exits
// with code: the agent container never starts and the pod fails, which the
// real Job controller turns into BackoffLimitExceeded.
func failInit(t *testing.T, ns, jobName string, code int32) {
	t.Helper()
	pod := podOf(t, ns, jobName)
	now := metav1.Now()
	pod.Status.Phase = corev1.PodFailed
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: jobbuild.InitContainerName, Image: pod.Spec.InitContainers[0].Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", StartedAt: now, FinishedAt: now}}}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: agentsv1alpha1.AgentContainerName, Image: "runner",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
	if _, err := env.Kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestAFailedInitStepIsTheRunsFailureReason: a run whose init container
// failed says which step failed and why (read from the init container's
// log) in its failureReason, its Initialized condition and its Failed
// Event, instead of the Job's BackoffLimitExceeded; when the log cannot be
// read or tells nothing, it names the init container and its exit code.
func TestAFailedInitStepIsTheRunsFailureReason(t *testing.T) {
	ns := env.Namespace(t)
	logs := &initLogs{logPod: "agent-job-clone-", brokenPod: "agent-job-nolog-", log: strings.Join([]string{
		`{"kind":"lifecycle","phase":"init","status":"started"}`,
		`{"kind":"lifecycle","phase":"init","status":"running","tool":"git"}`,
		`supervisor init: clone: clone app: git clone exited 128: fatal: repository 'https://github.com/o/app.git/' not found`,
		`{"time":"2026-11-29T12:00:00Z","level":"ERROR","msg":"init failed","reason":"clone","exit_code":14}`,
		`{"kind":"lifecycle","phase":"init","status":"failed","reason":"clone","exitCode":14,"message":"clone app: git clone exited 128: fatal: repository 'https://x-access-token:ghp_s3cret@github.com/o/app.git/' not found"}`,
	}, "\n") + "\n"}
	startWith(t, ns, startOptions{record: true,
		wrap: func(rt http.RoundTripper) http.RoundTripper { logs.next = rt; return logs }})

	mkStation(t, ns, "st", nil)
	cases := []struct {
		rule, agent string
		reason      func(string) bool
	}{
		{"the init step's failed line names the step, its exit code and message, without credentials", "clone",
			func(r string) bool {
				return r == "init step clone failed (exit 14): clone app: git clone exited 128: fatal: repository 'https://<redacted>@github.com/o/app.git/' not found"
			}},
		{"an unreadable init log names the init container and its exit code", "nolog",
			func(r string) bool {
				return strings.HasPrefix(r, `init container "init" failed (exit 14); its log could not be read: `) && strings.Contains(r, "kubelet unreachable")
			}},
		{"an init log without a failed line names the init container and its exit code", "nodeless",
			func(r string) bool { return r == `init container "init" failed (exit 14)` }},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			mkAgent(t, ns, tc.agent, "st")
			waitPhase(t, ns, tc.agent, agentsv1alpha1.PhaseRunning)
			failInit(t, ns, "agent-job-"+tc.agent, 14)
			a := waitPhase(t, ns, tc.agent, agentsv1alpha1.PhaseFailed)
			reason := a.Status.FailureReason
			if !tc.reason(reason) || a.Status.ExitCode == nil || *a.Status.ExitCode != 14 {
				t.Fatalf("failureReason %q exitCode %v", reason, a.Status.ExitCode)
			}
			if strings.Contains(reason, "s3cret") || strings.Contains(reason, "BackoffLimitExceeded") {
				t.Fatalf("failureReason %q", reason)
			}
			cond := meta.FindStatusCondition(a.Status.Conditions, agentsv1alpha1.ConditionInitialized)
			if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != agentsv1alpha1.ReasonInitFailed || cond.Message != reason {
				t.Fatalf("condition %+v, want Initialized=False, InitFailed, %q", cond, reason)
			}
			var failed eventsv1.Event
			eventually(t, "the Failed Event of "+tc.agent, func() bool {
				var ok bool
				failed, ok = agentEvents(t, ns, tc.agent)[decision.EventFailed]
				return ok
			})
			if failed.Type != corev1.EventTypeWarning || failed.Note != reason {
				t.Fatalf("Failed Event %s %q, want a Warning noting %q", failed.Type, failed.Note, reason)
			}
		})
	}
}
