package node_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
)

// TestLogsThroughAPIServer reads a multi-megabyte log through pods/log
// with the kubelet query parameters.
func TestLogsThroughAPIServer(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const lines = 500000
	createPod(t, ns, podSpec("big", sh("main", "seq 1 "+strconv.Itoa(lines))))
	waitPod(t, ns, "big", "Succeeded", phaseIs(corev1.PodSucceeded))
	var full strings.Builder
	for i := 1; i <= lines; i++ {
		full.WriteString(strconv.Itoa(i))
		full.WriteByte('\n')
	}
	if full.Len() < 2<<20 {
		t.Fatalf("test log is only %d bytes; it should be multi-megabyte", full.Len())
	}
	cases := []struct {
		name string
		opts corev1.PodLogOptions
		want string
	}{
		{name: "whole log", opts: corev1.PodLogOptions{}, want: full.String()},
		{name: "tailLines", opts: corev1.PodLogOptions{TailLines: ptr.To[int64](3)}, want: "499998\n499999\n500000\n"},
		{name: "limitBytes", opts: corev1.PodLogOptions{LimitBytes: ptr.To[int64](10)}, want: "1\n2\n3\n4\n5\n"},
		{name: "limitBytes cuts a line", opts: corev1.PodLogOptions{LimitBytes: ptr.To[int64](3), TailLines: ptr.To[int64](2)}, want: "499"},
		{name: "tailLines beyond the log gives all of it", opts: corev1.PodLogOptions{TailLines: ptr.To[int64](10 * lines)}, want: full.String()},
		{name: "sinceSeconds covering the run", opts: corev1.PodLogOptions{SinceSeconds: ptr.To[int64](3600), TailLines: ptr.To[int64](1)}, want: "500000\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := logs(t, ns, "big", &tc.opts)
			if got != tc.want {
				t.Fatalf("got %d bytes (ends %q), want %d bytes (ends %q)", len(got), tail(got), len(tc.want), tail(tc.want))
			}
		})
	}
	t.Run("timestamps", func(t *testing.T) {
		got := strings.TrimSuffix(logs(t, ns, "big", &corev1.PodLogOptions{Timestamps: true, TailLines: ptr.To[int64](1)}), "\n")
		ts, rest, ok := strings.Cut(got, " ")
		if !ok || rest != "500000" {
			t.Fatalf("timestamped line %q", got)
		}
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Fatalf("timestamp %q: %v", ts, err)
		}
	})
	t.Run("sinceTime after the run gives nothing", func(t *testing.T) {
		if got := logs(t, ns, "big", &corev1.PodLogOptions{SinceSeconds: ptr.To[int64](1)}); got != "" && !strings.HasSuffix(full.String(), got) {
			t.Fatalf("unexpected log %q", tail(got))
		}
	})
}

func tail(s string) string {
	if len(s) > 40 {
		return s[len(s)-40:]
	}
	return s
}

// TestPreviousAndFollowLogs: a container restarted by OnFailure keeps the
// log of its previous run; follow streams a running container to its end.
func TestPreviousAndFollowLogs(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	c := sh("main", "if [ -f /run/localnode-test/data/ran ]; then echo second run; exit 0; fi; touch /run/localnode-test/data/ran; echo first run; exit 1")
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/run/localnode-test/data"}}
	pod := podSpec("restarts", c)
	pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	createPod(t, ns, pod)
	p := waitPod(t, ns, "restarts", "Succeeded", phaseIs(corev1.PodSucceeded))
	cs := p.Status.ContainerStatuses[0]
	if cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
		t.Fatalf("want one restart after exit 1: %s", describe(p))
	}
	if got := logs(t, ns, "restarts", &corev1.PodLogOptions{}); got != "second run\n" {
		t.Errorf("current log %q", got)
	}
	if got := logs(t, ns, "restarts", &corev1.PodLogOptions{Previous: true}); got != "first run\n" {
		t.Errorf("previous log %q", got)
	}

	// stderr is kept too; the pause orders the two streams, which are read
	// independently.
	createPod(t, ns, podSpec("both-streams", sh("main", "echo to-stdout; sleep 0.5; echo to-stderr >&2")))
	waitPod(t, ns, "both-streams", "Succeeded", phaseIs(corev1.PodSucceeded))
	if got := logs(t, ns, "both-streams", &corev1.PodLogOptions{}); got != "to-stdout\nto-stderr\n" {
		t.Errorf("log of both streams %q", got)
	}

	createPod(t, ns, podSpec("follow", sh("main", "for i in 1 2 3 4 5; do echo line $i; sleep 0.2; done")))
	waitPod(t, ns, "follow", "Running", func(p *corev1.Pod) bool { return p != nil && p.Status.Phase != corev1.PodPending })
	stream, err := env.Kube.CoreV1().Pods(ns).GetLogs("follow", &corev1.PodLogOptions{Follow: true}).Stream(context.Background())
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	defer func() { _ = stream.Close() }()
	got, err := io.ReadAll(stream)
	if err != nil {
		t.Fatalf("read followed log: %v", err)
	}
	if string(got) != "line 1\nline 2\nline 3\nline 4\nline 5\n" {
		t.Fatalf("followed log %q", got)
	}
}

// TestKubectlLogs: kubectl logs, built for this Kubernetes version, reads a
// pod's log through the API server.
func TestKubectlLogs(t *testing.T) {
	t.Parallel()
	assets, err := kubeassets.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(assets, kubeassets.BinKubectl)
	ns := env.Namespace(t)
	createPod(t, ns, podSpec("hello", sh("main", "echo hello from localnode")))
	waitPod(t, ns, "hello", "Succeeded", phaseIs(corev1.PodSucceeded))
	kc, err := env.KubeconfigFor("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "--kubeconfig", path, "-n", ns, "logs", "hello").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl logs: %v: %s", err, out)
	}
	if string(out) != "hello from localnode\n" {
		t.Fatalf("kubectl logs printed %q", out)
	}
}
