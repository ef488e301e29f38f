package node_test

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestJobOutcome runs real Jobs (backoffLimit 0) through the Job
// controller: the container's exit decides the Job, and the exit code and
// reason are visible in the pod's status.
func TestJobOutcome(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		init      []corev1.Container
		main      corev1.Container
		wantJob   batchv1.JobConditionType
		wantPhase corev1.PodPhase
		// wantExit is checked on the init container when wantInitExit is
		// set, else on the main container.
		wantExit     int32
		wantReason   string
		wantInitExit bool
	}{
		{name: "exit 0 completes the job", main: sh("main", "echo hello"), wantJob: batchv1.JobComplete, wantPhase: corev1.PodSucceeded, wantExit: 0, wantReason: "Completed"},
		{name: "non-zero exit fails the job with the exit code", main: sh("main", "echo failing; exit 3"), wantJob: batchv1.JobFailed, wantPhase: corev1.PodFailed, wantExit: 3, wantReason: "Error"},
		{name: "failing init container fails the pod", init: []corev1.Container{sh("setup", "exit 7")}, main: sh("main", "echo never"), wantJob: batchv1.JobFailed, wantPhase: corev1.PodFailed, wantExit: 7, wantReason: "Error", wantInitExit: true},
		{name: "container without command fails with NoCommand", main: corev1.Container{Name: "main", Image: "x", Args: []string{"hello"}}, wantJob: batchv1.JobFailed, wantPhase: corev1.PodFailed, wantExit: 127, wantReason: "NoCommand"},
		{name: "missing executable fails with StartError", main: corev1.Container{Name: "main", Image: "x", Command: []string{"no-such-binary-here"}}, wantJob: batchv1.JobFailed, wantPhase: corev1.PodFailed, wantExit: 127, wantReason: "StartError"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			j := job("work", tc.main)
			j.Spec.Template.Spec.InitContainers = tc.init
			createJob(t, ns, j)
			_, cond := waitJob(t, ns, "work")
			if cond.Type != tc.wantJob {
				t.Fatalf("job condition %s (%s: %s), want %s", cond.Type, cond.Reason, cond.Message, tc.wantJob)
			}
			pods := jobPods(t, ns, "work")
			if len(pods) != 1 {
				t.Fatalf("job has %d pods, want 1", len(pods))
			}
			p := waitPod(t, ns, pods[0].Name, "a terminal phase", terminal)
			if p.Status.Phase != tc.wantPhase {
				t.Fatalf("pod phase %s, want %s: %s", p.Status.Phase, tc.wantPhase, describe(p))
			}
			statuses := p.Status.ContainerStatuses
			if tc.wantInitExit {
				statuses = p.Status.InitContainerStatuses
			}
			term := statuses[0].State.Terminated
			if term == nil || term.ExitCode != tc.wantExit || term.Reason != tc.wantReason {
				t.Fatalf("container state %s, want terminated %d %s", stateString(statuses[0].State), tc.wantExit, tc.wantReason)
			}
			if term.StartedAt.IsZero() || term.FinishedAt.IsZero() {
				t.Errorf("terminated state lacks start/finish times: %+v", term)
			}
			if p.Status.PodIP != "127.0.0.1" || p.Status.HostIP != "127.0.0.1" {
				t.Errorf("podIP %q hostIP %q, want loopback", p.Status.PodIP, p.Status.HostIP)
			}
			if tc.wantInitExit && condition(p, corev1.PodInitialized) != corev1.ConditionFalse {
				t.Errorf("Initialized should be False after a failed init container: %s", describe(p))
			}
			if tc.wantJob == batchv1.JobComplete {
				if got := logs(t, ns, p.Name, &corev1.PodLogOptions{}); strings.TrimSpace(got) != "hello" {
					t.Errorf("log %q, want hello", got)
				}
			}
		})
	}
}

// TestSidecarRunsBesideTheJob: an init container with restartPolicy Always
// starts before the main container, runs beside it, and is stopped once the
// main container is done, so the Job completes.
func TestSidecarRunsBesideTheJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	mount := []corev1.VolumeMount{{Name: "shared", MountPath: "/run/localnode-test/shared"}}
	side := sh("sidecar", "echo from-sidecar > /run/localnode-test/shared/msg; exec sleep 3600")
	side.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	side.VolumeMounts = mount
	main := sh("main", "while [ ! -f /run/localnode-test/shared/msg ]; do sleep 0.1; done; cat /run/localnode-test/shared/msg")
	main.VolumeMounts = mount
	j := job("with-sidecar", main)
	j.Spec.Template.Spec.InitContainers = []corev1.Container{side}
	j.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	createJob(t, ns, j)
	if _, cond := waitJob(t, ns, "with-sidecar"); cond.Type != batchv1.JobComplete {
		t.Fatalf("job condition %s: %s", cond.Type, cond.Message)
	}
	pods := jobPods(t, ns, "with-sidecar")
	if len(pods) != 1 {
		t.Fatalf("%d pods", len(pods))
	}
	p := waitPod(t, ns, pods[0].Name, "Succeeded", phaseIs(corev1.PodSucceeded))
	if st := p.Status.InitContainerStatuses[0].State; st.Terminated == nil {
		t.Errorf("the sidecar should be stopped once the job's container is done: %s", describe(p))
	}
	if got := logs(t, ns, p.Name, &corev1.PodLogOptions{Container: "main"}); got != "from-sidecar\n" {
		t.Errorf("main container log %q", got)
	}
}
