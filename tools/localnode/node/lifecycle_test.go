package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// hostDir is a hostPath volume the test shares with a container.
func hostDir(t *testing.T) (string, corev1.Volume) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}}
}

// waitFile waits until path exists and returns its content.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		if raw, err := os.ReadFile(path); err == nil && len(raw) > 0 {
			return string(raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
	return ""
}

// TestDeletionWithGracePeriod: deleting a pod whose process ignores SIGTERM
// delivers SIGTERM, waits out the grace period, SIGKILLs the process group
// and then finalises the pod so it disappears from the API.
func TestDeletionWithGracePeriod(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	dir, vol := hostDir(t)
	// $$$$ is $$ once the kubelet-style $(VAR) expansion has unescaped it.
	c := sh("main", "trap 'echo got-term >> /run/localnode-test/host/events' TERM; echo $$$$ > /run/localnode-test/host/pid; while true; do sleep 0.2; done")
	c.VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/run/localnode-test/host"}}
	pod := podSpec("stubborn", c)
	pod.Spec.Volumes = []corev1.Volume{vol}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	createPod(t, ns, pod)
	waitPod(t, ns, "stubborn", "Running", phaseIs(corev1.PodRunning))
	pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.CoreV1().Pods(ns).Delete(context.Background(), "stubborn", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](2)}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, ns, "stubborn", "a deletion timestamp", func(p *corev1.Pod) bool { return p == nil || p.DeletionTimestamp != nil })
	if p != nil && (p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 2) {
		t.Errorf("deletion grace period %v, want 2", p.DeletionGracePeriodSeconds)
	}
	waitPod(t, ns, "stubborn", "removal from the API", func(p *corev1.Pod) bool { return p == nil })
	if ev := waitFile(t, filepath.Join(dir, "events")); !strings.Contains(ev, "got-term") {
		t.Errorf("the process never saw SIGTERM: %q", ev)
	}
	// Killed means gone or a zombie: who reaps an orphan is up to the host.
	if raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil && !strings.Contains(string(raw), ") Z ") {
		t.Errorf("process %d still runs after the pod is gone: %s", pid, raw)
	}
}

// TestActiveDeadline: a pod past activeDeadlineSeconds is killed and fails
// with DeadlineExceeded; a Job past its own deadline fails likewise through
// the Job controller, which deletes its pod.
func TestActiveDeadline(t *testing.T) {
	t.Parallel()
	t.Run("pod", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		pod := podSpec("slow", sh("main", "sleep 600"))
		pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](2)
		createPod(t, ns, pod)
		p := waitPod(t, ns, "slow", "Failed", phaseIs(corev1.PodFailed))
		if p.Status.Reason != "DeadlineExceeded" {
			t.Fatalf("pod reason %q, want DeadlineExceeded: %s", p.Status.Reason, describe(p))
		}
		if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 143 {
			t.Errorf("container should end by SIGTERM (143): %s", describe(p))
		}
	})
	t.Run("job", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		j := job("slow", sh("main", "sleep 600"))
		j.Spec.ActiveDeadlineSeconds = ptr.To[int64](2)
		createJob(t, ns, j)
		_, cond := waitJob(t, ns, "slow")
		if cond.Type != batchv1.JobFailed || cond.Reason != batchv1.JobReasonDeadlineExceeded {
			t.Fatalf("job condition %s/%s, want Failed/DeadlineExceeded", cond.Type, cond.Reason)
		}
		waitNoPods(t, ns, "slow")
	})
}

func waitNoPods(t *testing.T, ns, jobName string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		if len(jobPods(t, ns, jobName)) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pods of job %s were never removed", jobName)
}

// TestJobRemoval: a finished Job with ttlSecondsAfterFinished is removed
// with its pods by the TTL controller; deleting a running Job cascades
// through the garbage collector to its pod, which the node stops and
// finalises.
func TestJobRemoval(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		script string
		ttl    *int32
		remove func(t *testing.T, ns string)
	}{
		{name: "ttlSecondsAfterFinished removes a finished job", script: "echo done", ttl: ptr.To[int32](1), remove: func(t *testing.T, ns string) {
			// The TTL controller only removes finished Jobs, so the Job may
			// be gone before this sees it Complete.
			waitFor(t, "the job to complete", func() bool {
				j, err := env.Kube.BatchV1().Jobs(ns).Get(context.Background(), "gone", metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return true
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range j.Status.Conditions {
					if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
						t.Fatalf("job failed: %s", c.Message)
					}
					if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
						return true
					}
				}
				return false
			})
		}},
		{name: "deleting a running job cascades to its pod", script: "sleep 600", remove: func(t *testing.T, ns string) {
			waitJobPodRunning(t, ns, "gone")
			if err := env.Kube.BatchV1().Jobs(ns).Delete(context.Background(), "gone", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			j := job("gone", sh("main", tc.script))
			j.Spec.TTLSecondsAfterFinished = tc.ttl
			createJob(t, ns, j)
			tc.remove(t, ns)
			deadline := time.Now().Add(waitLimit)
			for {
				_, err := env.Kube.BatchV1().Jobs(ns).Get(context.Background(), "gone", metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("job still exists (err %v)", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			waitNoPods(t, ns, "gone")
		})
	}
}

func waitJobPodRunning(t *testing.T, ns, jobName string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		for _, p := range jobPods(t, ns, jobName) {
			if p.Status.Phase == corev1.PodRunning {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no pod of job %s runs", jobName)
}
