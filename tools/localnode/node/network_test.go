package node_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// webPod serves HTTP on :8080 from the test image; its host name (the pod
// name) is the answer. probe picks how readiness is checked.
func webPod(name string, probe corev1.ProbeHandler) *corev1.Pod {
	c := corev1.Container{Name: "main", Image: probeImage, Args: []string{"serve", "8080"},
		Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: probe, PeriodSeconds: 1}}
	p := onImageNode(podSpec(name, c))
	p.Labels = map[string]string{"app": "web"}
	p.Spec.RestartPolicy = corev1.RestartPolicyAlways
	p.Spec.TerminationGracePeriodSeconds = new(int64)
	return p
}

func ready(p *corev1.Pod) bool {
	return p != nil && condition(p, corev1.PodReady) == corev1.ConditionTrue
}

// hostGet fetches a URL from the host (the test process), retrying
// briefly.
func hostGet(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := client.Get(url)
		if err != nil {
			last = err
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return string(body)
	}
	t.Fatalf("GET %s from the host: %v", url, last)
	return ""
}

// TestPodNetwork: two pods both bind :8080 side by side, each with its own
// address that the host reaches; a third reaches them through a Service
// name (short and fully qualified), and after a rolling replacement only
// the current pods answer.
func TestPodNetwork(t *testing.T) {
	t.Parallel()
	startImageNode(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	httpReady := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}
	execReady := corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"podprobe", "info"}}}
	createPod(t, ns, webPod("web-0", httpReady))
	createPod(t, ns, webPod("web-1", execReady))
	ips := map[string]string{}
	for _, name := range []string{"web-0", "web-1"} {
		p := waitPod(t, ns, name, "Ready", ready)
		ips[name] = p.Status.PodIP
		if got := hostGet(t, fmt.Sprintf("http://%s/", net.JoinHostPort(p.Status.PodIP, "8080"))); got != name {
			t.Errorf("GET %s:8080 from the host answered %q, want %q", p.Status.PodIP, got, name)
		}
	}
	if ips["web-0"] == ips["web-1"] || !strings.HasPrefix(ips["web-0"], "10.88.") {
		t.Fatalf("pod IPs %v: want two distinct addresses of the pod subnet", ips)
	}
	svc, err := env.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(name, url string, want ...string) {
		t.Helper()
		c := corev1.Container{Name: "main", Image: probeImage, Args: []string{"fetch", url, fmt.Sprint(len(want))}}
		log := runToLog(t, ns, onImageNode(podSpec(name, c)), "main")
		var lines []string
		for _, w := range want {
			lines = append(lines, "FETCHED="+w)
		}
		wantLines(t, log, lines...)
	}
	fetch("client-short", "http://web/", "web-0", "web-1")
	// The host's route to a ClusterIP is first come, first served between
	// localnodes of different clusters on one host, so it is not checked
	// here; pods reach their own cluster's ClusterIPs, by address too.
	fetch("client-ip", "http://"+svc.Spec.ClusterIP+"/", "web-0", "web-1")

	// A rolling replacement: web-0 goes, web-2 comes.
	if err := env.Kube.CoreV1().Pods(ns).Delete(ctx, "web-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "web-0", "deleted", func(p *corev1.Pod) bool { return p == nil })
	createPod(t, ns, webPod("web-2", httpReady))
	waitPod(t, ns, "web-2", "Ready", ready)
	fetch("client-fqdn", "http://web."+ns+".svc.cluster.local/", "web-1", "web-2")
	if log := logs(t, ns, "client-fqdn", &corev1.PodLogOptions{}); strings.Contains(log, "FETCHED=web-0") {
		t.Errorf("a deleted pod still answered through the Service:\n%s", log)
	}
}
