package stack

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func TestATakenPortIsAOneLineError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	port := l.Addr().(*net.TCPAddr).Port
	assets := t.TempDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if err := os.WriteFile(filepath.Join(assets, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err = Up(context.Background(), Config{Dir: t.TempDir(), Assets: assets, APIServerPort: port, EtcdPort: freePort(t), EtcdPeerPort: freePort(t), ControllerManagerPort: freePort(t)})
	if err == nil || !strings.Contains(err.Error(), "is taken") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want a one-line 'is taken' error, got %v", err)
	}
}

func TestAMissingBinaryIsAOneLineError(t *testing.T) {
	_, err := Up(context.Background(), Config{Dir: t.TempDir(), Assets: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "missing") || !strings.Contains(err.Error(), "kubestack build") {
		t.Fatalf("want a 'missing ... kubestack build' error, got %v", err)
	}
}

func TestAComponentThatDiesIsReportedWithItsLog(t *testing.T) {
	assets := t.TempDir()
	// An "etcd" that prints a complaint and exits, as a bad flag would.
	script := "#!/bin/sh\necho 'etcd: fatal: cannot open data dir' >&2\nexit 1\n"
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if err := os.WriteFile(filepath.Join(assets, b), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Up(ctx, Config{Dir: t.TempDir(), Assets: assets, APIServerPort: freePort(t), EtcdPort: freePort(t), EtcdPeerPort: freePort(t), ControllerManagerPort: freePort(t), ReadyTimeout: 20 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "exited during startup") || !strings.Contains(err.Error(), "cannot open data dir") {
		t.Fatalf("want the dead component's log in the error, got %v", err)
	}
}

func TestDownWithNothingRunningIsFine(t *testing.T) {
	if err := Down(filepath.Join(t.TempDir(), "none"), os.Stderr); err != nil {
		t.Fatal(err)
	}
}

// TestUpRunsARealControlPlane starts etcd, kube-apiserver,
// kube-controller-manager and localnode (with its pod network), then checks
// what agent runs need: the Job controller makes a pod, localnode runs it
// to completion with its log readable through pods/log, and the garbage
// collector removes it with its Job; a pod's in-cluster client reaches the
// API server as its ServiceAccount (kubestack's certificate verified);
// down stops localnode with the rest.
func TestUpRunsARealControlPlane(t *testing.T) {
	assets, err := kubeassets.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "stack")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Dir: dir, Assets: assets, CRDDir: filepath.Join(root, "deploy", "crds"),
		APIServerPort: freePort(t), EtcdPort: freePort(t), EtcdPeerPort: freePort(t), ControllerManagerPort: freePort(t),
		LocalNode: &LocalNode{Command: []string{self, "localnode"}, Port: freePort(t), PodNetwork: true}}
	r, err := Up(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = Down(dir, os.Stderr) }()

	if _, err := Up(ctx, cfg); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("a second up over a running stack must refuse: %v", err)
	}

	cl, err := newClients(r.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	crds, err := cl.ext.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ReadCRDs(cfg.CRDDir)
	if len(crds.Items) != len(want) {
		t.Errorf("%d CRDs installed, want %d", len(crds.Items), len(want))
	}
	v, err := cl.kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != kubeassets.KubeVersion {
		t.Errorf("server reports %s, want %s (ldflags stamp)", v.GitVersion, kubeassets.KubeVersion)
	}

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "scratch", Command: []string{"/bin/sh", "-c", "echo ran on localnode"}}},
		}}},
	}
	created, err := cl.kube.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sel := labels.Set{"batch.kubernetes.io/job-name": "probe"}.String()
	waitFor(ctx, t, "the Job controller to create a pod", func() bool {
		pods, err := cl.kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		return err == nil && len(pods.Items) == 1 && pods.Items[0].OwnerReferences[0].UID == created.UID
	})
	waitFor(ctx, t, "localnode to run the Job to completion", func() bool {
		j, err := cl.kube.BatchV1().Jobs("default").Get(ctx, "probe", metav1.GetOptions{})
		return err == nil && j.Status.Succeeded == 1
	})
	pods, err := cl.kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("list the Job's pod: %v", err)
	}
	out, err := cl.kube.CoreV1().Pods("default").GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || string(out) != "ran on localnode\n" {
		t.Fatalf("pods/log: %q, %v", out, err)
	}
	if ip := pods.Items[0].Status.PodIP; !strings.HasPrefix(ip, "10.88.") {
		t.Errorf("podIP %q, want an address of localnode's pod network", ip)
	}
	whoami := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "whoami", Namespace: "default"}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "c", Image: "scratch", Command: []string{self, "whoami-in-cluster"}}},
	}}
	if _, err := cl.kube.CoreV1().Pods("default").Create(ctx, whoami, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the in-cluster client pod to finish", func() bool {
		p, err := cl.kube.CoreV1().Pods("default").Get(ctx, "whoami", metav1.GetOptions{})
		return err == nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	})
	out, err = cl.kube.CoreV1().Pods("default").GetLogs("whoami", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || string(out) != "system:serviceaccount:default:default\n" {
		t.Errorf("the in-cluster client said %q (%v), want it authenticated as the default ServiceAccount", out, err)
	}
	bg := metav1.DeletePropagationBackground
	if err := cl.kube.BatchV1().Jobs("default").Delete(ctx, "probe", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the garbage collector to delete the Job's pod", func() bool {
		pods, err := cl.kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		return err == nil && len(pods.Items) == 0
	})

	if err := Down(dir, os.Stderr); err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Processes {
		// Down sees a process gone once it is a zombie; this test's own
		// reaper may close done a moment later.
		waitFor(ctx, t, p.Name+" to be gone after down", func() bool { return !p.alive() })
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state dir survives down: %v", err)
	}
}

func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
