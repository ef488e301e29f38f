package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// waitLimit bounds every wait so a broken behaviour fails instead of
// hanging; tests never assert how long anything took.
const waitLimit = 90 * time.Second

// sh is a container running a shell script.
func sh(name, script string) corev1.Container {
	return corev1.Container{Name: name, Image: "busybox:test", Command: []string{"/bin/sh", "-c", script}}
}

// createPod creates a pod that localnode will bind.
func createPod(t *testing.T, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	pod.Namespace = ns
	if pod.Spec.RestartPolicy == "" {
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	}
	got, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return got
}

func podSpec(name string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: containers}}
}

// waitPod polls the pod until ok says so; a nil pod means it is gone.
func waitPod(t *testing.T, ns, name, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		p, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if ok(nil) {
				return nil
			}
		case err != nil:
			t.Fatalf("get pod %s: %v", name, err)
		default:
			last = p
			if ok(p) {
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pod %s/%s never got %s; last status: %s", ns, name, what, describe(last))
	return nil
}

func phaseIs(phase corev1.PodPhase) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == phase }
}

func terminal(p *corev1.Pod) bool {
	return p != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
}

func condition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func describe(p *corev1.Pod) string {
	if p == nil {
		return "<none>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s reason=%s node=%s", p.Status.Phase, p.Status.Reason, p.Spec.NodeName)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s(%s %s)", c.Type, c.Status, c.Reason, c.Message)
	}
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			fmt.Fprintf(&b, " [%s ready=%v restarts=%d %s]", cs.Name, cs.Ready, cs.RestartCount, stateString(cs.State))
		}
	}
	return b.String()
}

func stateString(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return "waiting " + s.Waiting.Reason + " " + s.Waiting.Message
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated %d %s %s", s.Terminated.ExitCode, s.Terminated.Reason, s.Terminated.Message)
	}
	return "unknown"
}

// logs reads a container's log through the API server's pods/log.
func logs(t *testing.T, ns, pod string, opts *corev1.PodLogOptions) string {
	t.Helper()
	raw, err := env.Kube.CoreV1().Pods(ns).GetLogs(pod, opts).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("pods/log of %s: %v", pod, err)
	}
	return string(raw)
}

// job builds a Job with backoffLimit 0 running containers.
func job(name string, containers ...corev1.Container) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: containers,
				TerminationGracePeriodSeconds: ptr.To[int64](5),
			}},
		},
	}
}

func createJob(t *testing.T, ns string, j *batchv1.Job) *batchv1.Job {
	t.Helper()
	got, err := env.Kube.BatchV1().Jobs(ns).Create(context.Background(), j, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create job %s: %v", j.Name, err)
	}
	return got
}

// waitJob waits until the Job has a true condition of kind Complete or
// Failed and returns it.
func waitJob(t *testing.T, ns, name string) (*batchv1.Job, batchv1.JobCondition) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		j, err := env.Kube.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get job %s: %v", name, err)
		}
		for _, c := range j.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				return j, c
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("job %s/%s never finished", ns, name)
	return nil, batchv1.JobCondition{}
}

// jobPods lists the pods of a Job.
func jobPods(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	sel := labels.SelectorFromSet(labels.Set{batchv1.JobNameLabel: name}).String()
	list, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatalf("list pods of job %s: %v", name, err)
	}
	return list.Items
}

func fieldsEverything() fields.Selector { return fields.Everything() }
