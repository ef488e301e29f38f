package node_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentplane/agentplane/tools/localnode/node"
)

// TestRestartMidRun stops a node while its pod runs and starts a new one on
// the same state directory: the process keeps running meanwhile, and the
// new node adopts it — or, when it ended while no node watched, still
// reports its exit code from the shim's record.
func TestRestartMidRun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// exitWhileDown lets the process finish while no node runs.
		exitWhileDown bool
		wantLog       []string
	}{
		{name: "a running process is adopted and its log continues", wantLog: []string{"init done", "before restart", "after restart"}},
		{name: "a process that ended while the node was down reports its exit code", exitWhileDown: true, wantLog: []string{"init done", "before restart"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			name := "restarting-" + strconv.Itoa(i)
			state := t.TempDir()
			start := func() *node.Node {
				n, err := node.Start(context.Background(), node.Config{
					RESTConfig: env.Config, Name: name, StateDir: state, LeavePodsRunning: true,
					// Other tests' pods must never be bound here: this
					// node stops while they would still need it.
					Taints: []corev1.Taint{{Key: "localnode.test/restarting", Effect: corev1.TaintEffectNoSchedule}},
					Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
				})
				if err != nil {
					t.Fatalf("start node: %v", err)
				}
				return n
			}
			n := start()
			dir, vol := hostDir(t)
			initC := sh("init", "echo init done")
			c := sh("main", "echo before restart; echo $$$$ > /run/localnode-test/ctl/pid; while [ ! -f /run/localnode-test/ctl/go ]; do sleep 0.1; done; echo after restart; exit 4")
			c.VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/run/localnode-test/ctl"}}
			pod := podSpec("work", c)
			pod.Spec.InitContainers = []corev1.Container{initC}
			pod.Spec.Volumes = []corev1.Volume{vol}
			// Bound directly: the shared node would bind it otherwise.
			pod.Spec.NodeName = name
			createPod(t, ns, pod)
			waitPod(t, ns, "work", "Running", phaseIs(corev1.PodRunning))
			pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"))))
			if err != nil {
				t.Fatal(err)
			}
			// Nodes here leave processes running: never leak one when the
			// test fails half-way. The command leads its own group.
			t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
			n.Stop()
			if err := syscall.Kill(pid, 0); err != nil {
				t.Fatalf("the container process did not survive the node stopping: %v", err)
			}
			if tc.exitWhileDown {
				if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
				waitGone(t, pid)
			}
			n = start()
			defer n.Stop()
			if !tc.exitWhileDown {
				if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			p := waitPod(t, ns, "work", "Failed", phaseIs(corev1.PodFailed))
			if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 4 {
				t.Fatalf("want exit code 4 from the adopted process: %s", describe(p))
			}
			if cs := p.Status.ContainerStatuses[0]; cs.RestartCount != 0 {
				t.Errorf("the adopted container was restarted: %s", describe(p))
			}
			wantLines(t, logs(t, ns, "work", &corev1.PodLogOptions{Container: "init"})+logs(t, ns, "work", &corev1.PodLogOptions{Container: "main"}), tc.wantLog...)
		})
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, "process exit", func() bool {
		raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		return err != nil || strings.Contains(string(raw), ") Z ")
	})
}
