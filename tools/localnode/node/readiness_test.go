package node_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// readyIs waits for the pod's Ready condition to have the given status
// while its container runs.
func readyIs(want corev1.ConditionStatus) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		return p != nil && p.Status.Phase == corev1.PodRunning && condition(p, corev1.PodReady) == want && condition(p, corev1.ContainersReady) == want
	}
}

// TestReadinessProbeFlipsReady: each probe kind turns Ready on when it
// starts passing and off when it fails again; the test controls the probed
// thing.
func TestReadinessProbeFlipsReady(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// setup returns the probe handler and functions making it pass and
		// fail.
		setup func(t *testing.T, pod *corev1.Pod) (corev1.ProbeHandler, func(), func())
	}{
		{name: "exec", setup: func(t *testing.T, pod *corev1.Pod) (corev1.ProbeHandler, func(), func()) {
			dir, vol := hostDir(t)
			pod.Spec.Volumes = []corev1.Volume{vol}
			pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/run/localnode-test/probe"}}
			flag := filepath.Join(dir, "ready")
			return corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/run/localnode-test/probe/ready"}}},
				func() { _ = os.WriteFile(flag, []byte("ok"), 0o644) }, func() { _ = os.Remove(flag) }
		}},
		{name: "httpGet", setup: func(t *testing.T, _ *corev1.Pod) (corev1.ProbeHandler, func(), func()) {
			var ok atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/healthz" || !ok.Load() {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			}))
			t.Cleanup(srv.Close)
			port := srv.Listener.Addr().(*net.TCPAddr).Port
			return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(int32(port))}},
				func() { ok.Store(true) }, func() { ok.Store(false) }
		}},
		{name: "tcpSocket", setup: func(t *testing.T, pod *corev1.Pod) (corev1.ProbeHandler, func(), func()) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			_ = l.Close()
			// A named port, resolved through the container's ports.
			pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "probe", ContainerPort: int32(port)}}
			var cur atomic.Pointer[net.Listener]
			t.Cleanup(func() {
				if p := cur.Load(); p != nil {
					_ = (*p).Close()
				}
			})
			return corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("probe")}},
				func() {
					nl, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
					if err != nil {
						t.Errorf("listen: %v", err)
						return
					}
					go func() {
						for {
							c, err := nl.Accept()
							if err != nil {
								return
							}
							_ = c.Close()
						}
					}()
					cur.Store(&nl)
				},
				func() {
					if p := cur.Swap(nil); p != nil {
						_ = (*p).Close()
					}
				}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			c := sh("main", "sleep 600")
			pod := podSpec("probed", c)
			handler, pass, fail := tc.setup(t, pod)
			pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: handler, PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 1}
			pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
			createPod(t, ns, pod)
			waitPod(t, ns, "probed", "Running and not Ready", readyIs(corev1.ConditionFalse))
			pass()
			waitPod(t, ns, "probed", "Ready", readyIs(corev1.ConditionTrue))
			fail()
			waitPod(t, ns, "probed", "not Ready again", readyIs(corev1.ConditionFalse))
		})
	}
}

// TestLivenessProbeRestartsContainer: a failing liveness probe stops the
// container, and restartPolicy Always starts it again.
func TestLivenessProbeRestartsContainer(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	c := sh("main", "echo started; sleep 600")
	c.LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}},
		PeriodSeconds: 1, FailureThreshold: 2, TerminationGracePeriodSeconds: ptr.To[int64](1),
	}
	pod := podSpec("unhealthy", c)
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	createPod(t, ns, pod)
	p := waitPod(t, ns, "unhealthy", "a restart", func(p *corev1.Pod) bool {
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
	if last == nil || last.ExitCode != 143 {
		t.Fatalf("the killed run should show in lastState as exit 143 (SIGTERM): %s", describe(p))
	}
}

// TestDeploymentReachesReadyReplicas: a Deployment's pods are bound, run,
// pass readiness and the Deployment reports its ready replicas; scaling
// down stops and removes the surplus pods.
func TestDeploymentReachesReadyReplicas(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	c := sh("web", "sleep 3600")
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 1}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, TerminationGracePeriodSeconds: ptr.To[int64](2)},
			},
		},
	}
	if _, err := env.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "web", func(d *appsv1.Deployment) bool {
		return d.Status.ReadyReplicas == 3 && d.Status.AvailableReplicas == 3 && d.Status.UpdatedReplicas == 3
	})
	if _, err := env.Kube.AppsV1().Deployments(ns).Patch(ctx, "web", "application/merge-patch+json", []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "web", func(d *appsv1.Deployment) bool { return d.Status.Replicas == 1 && d.Status.ReadyReplicas == 1 })
	deadline := time.Now().Add(waitLimit)
	for {
		list, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pods remain after scaling to 1", len(list.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitDeployment(t *testing.T, ns, name string, ok func(*appsv1.Deployment) bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	var last *appsv1.Deployment
	for time.Now().Before(deadline) {
		d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = d
		if ok(d) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("deployment %s never got there: %+v", name, last.Status)
}
