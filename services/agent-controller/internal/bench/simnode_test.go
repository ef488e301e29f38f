package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// simNodeName is the simulated node's Node.
const simNodeName = "bench-node"

// startSimNode builds tools/localnode and runs it against the control
// plane in its simulated-runs mode: every pod bound to it goes Running at
// once and Succeeded after a run length drawn per pod from [lo, hi], with
// no process behind it. It returns once the Node is Ready and without
// taints (the node lifecycle controller lifts the not-ready taint).
func startSimNode(t *testing.T, kube kubernetes.Interface, lo, hi time.Duration, maxPods int) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "localnode")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/agentplane/agentplane/tools/localnode").CombinedOutput(); err != nil {
		t.Fatalf("build localnode: %v\n%s", err, out)
	}
	logPath := filepath.Join(dir, "localnode.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig(t, dir, "localnode"), "--name", simNodeName,
		"--state-dir", filepath.Join(dir, "state"), "--kubelet-port", "0", "--stop-pods-on-exit",
		"--simulate-runs", lo.String()+"-"+hi.String(), "--max-pods", strconv.Itoa(maxPods),
		// The same client rate limit as both controllers: the node never
		// holds the runs back.
		"--kube-api-qps", strconv.Itoa(clientQPS), "--kube-api-burst", strconv.Itoa(clientBurst))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logFile.Close()
		if t.Failed() {
			if raw, err := os.ReadFile(logPath); err == nil {
				t.Logf("localnode log:\n%s", tail(string(raw), 40))
			}
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := kube.CoreV1().Nodes().Get(context.Background(), simNodeName, metav1.GetOptions{})
		if err == nil && nodeReady(n) && len(n.Spec.Taints) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the simulated node was not Ready and untainted within a minute (last error: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// reconciles scrapes the binary's /metrics and adds up
// controller_reconciles_total over all its results.
func reconciles(t *testing.T, addr string) float64 {
	t.Helper()
	var sum float64
	var err error
	for range 100 { // the listener comes up with the process
		if sum, err = metricSum(addr, "controller_reconciles_total"); err == nil {
			return sum
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal(err)
	return 0
}

// metricSum is the sum of one metric's samples scraped from addr.
func metricSum(addr, name string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape %s: %s", addr, resp.Status)
	}
	sum, err := sumCounter(resp.Body, name)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", addr, err)
	}
	return sum, nil
}

// sumCounter adds up every sample of one metric in the Prometheus text
// format.
func sumCounter(r io.Reader, name string) (float64, error) {
	var sum float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue // a comment, another metric, or one whose name only starts so
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// follow watches from the newest state until ctx ends, handing each event
// to fn and opening the watch again from the last resourceVersion seen
// when the server ends it (from the newest state after an error event,
// such as 410 Gone, so fn must take a repeated event).
func follow(ctx context.Context, t *testing.T, open func(rv string) (watch.Interface, error), fn func(watch.Event)) {
	rv := ""
	for ctx.Err() == nil {
		w, err := open(rv)
		if err != nil {
			if ctx.Err() == nil {
				t.Logf("watch: %v; again", err)
			}
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = ""
				continue
			}
			if o, ok := ev.Object.(metav1.Object); ok && o.GetResourceVersion() != "" {
				rv = o.GetResourceVersion()
			}
			if ev.Type != watch.Bookmark {
				fn(ev)
			}
		}
		w.Stop()
	}
}
