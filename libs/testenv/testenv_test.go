package testenv_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{ControllerManager: true}))
}

func TestEachTestGetsItsOwnNamespace(t *testing.T) {
	a, b := env.Namespace(t), env.Namespace(t)
	if a == b {
		t.Fatalf("two calls gave the same namespace %s", a)
	}
	if !strings.HasPrefix(a, "testeachtestgetsitsownnamespace-") {
		t.Errorf("namespace %s is not named after the test", a)
	}
	if _, err := env.Kube.CoreV1().Namespaces().Get(context.Background(), a, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestControllerManagerRunsJobs: with the controller-manager option a Job
// gets its pod, which needs the default ServiceAccount to be admitted.
func TestControllerManagerRunsJobs(t *testing.T) {
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "none", Command: []string{"true"}}},
		}}},
	}
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	for {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=j"})
		if err == nil && len(pods.Items) == 1 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the Job controller never created the pod")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func TestAssetsDirNamesTheMissingBinary(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	_, err := kubeassets.AssetsDir()
	if err == nil || !strings.Contains(err.Error(), "make kube-binaries") {
		t.Fatalf("want a hint to build the binaries, got %v", err)
	}
}
