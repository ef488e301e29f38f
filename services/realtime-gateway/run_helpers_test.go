package main

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/fnv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/lockedio"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/route"
)

// rtRun is a realtime Agent in the apiserver and, once served, its
// supervisor process on loopback standing in for the run pod.
type rtRun struct {
	t      *testing.T
	agent  *agentsv1alpha1.Agent
	dir    string
	starts string
	sup    *exec.Cmd
	stderr *lockedio.Buffer
	addr   string
	exited chan struct{}
}

// newAgent creates Agent ns/name (Pending: no status yet).
func newAgent(t *testing.T, ns, name string) *rtRun {
	t.Helper()
	ensureDefaultSA(t, ns)
	a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: agentsv1alpha1.AgentSpec{StationRef: "chat"}}
	if err := env.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &rtRun{t: t, agent: a, dir: dir, starts: filepath.Join(dir, "starts.log")}
}

// ensureDefaultSA creates the default ServiceAccount, which the pods need
// and which no controller-manager creates here.
func ensureDefaultSA(t *testing.T, ns string) {
	t.Helper()
	_, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// serve starts `supervisor run` in realtime mode for the Agent, with the
// token the controller would derive from its uid, and waits for its
// address.
func (r *rtRun) serve(extraEnv ...string) {
	r.t.Helper()
	bin := filepath.Join(r.dir, "bin")
	// A wrapper in front of the mock CLI records each start, so a test can
	// tell that nothing reached the CLI.
	mustWrite(r.t, filepath.Join(bin, "claude"), "#!/bin/sh\necho \"$*\" >> "+r.starts+"\nexec "+filepath.Join(mockDir, "mockagent")+" --vendor claude \"$@\"\n")
	if err := os.Chmod(filepath.Join(bin, "claude"), 0o755); err != nil {
		r.t.Fatal(err)
	}
	spec, err := runspec.Encode(&runspec.Spec{Model: "claude-sonnet-4-6", PermissionMode: "auto", Execution: "realtime"})
	if err != nil {
		r.t.Fatal(err)
	}
	home := filepath.Join(r.dir, "home")
	ws := filepath.Join(r.dir, "ws")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			r.t.Fatal(err)
		}
	}
	cmd := exec.Command(supervisorBin, "run", "--supervisor-agent-dir", filepath.Join(r.dir, "agent"))
	cmd.Env = append([]string{
		"PATH=" + bin + ":" + mockDir + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "WORKSPACE_DIR=" + ws,
		"AGENT_NAME=" + r.agent.Name, "AGENT_NAMESPACE=" + r.agent.Namespace, "AGENT_UID=" + string(r.agent.UID),
		"STATION_NAME=chat", "SUPERVISOR_CHOWN=none", runspec.EnvName + "=" + spec,
		realtime.EnvToken + "=" + realtime.Token(testKey, string(r.agent.UID)) + "\n", realtime.EnvAddr + "=127.0.0.1:0", "AGENT_EXIT_GRACE_MS=1000",
	}, extraEnv...)
	r.stderr = &lockedio.Buffer{}
	cmd.Stdout, cmd.Stderr = &lockedio.Buffer{}, r.stderr
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.sup, r.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(r.exited) }()
	r.t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			_ = cmd.Process.Kill()
			<-r.exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for r.addr == "" {
		select {
		case <-r.exited:
			r.t.Fatalf("supervisor exited before serving:\n%s", r.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("supervisor not serving after 30s:\n%s", r.stderr.String())
		}
		for _, line := range strings.Split(r.stderr.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "realtime session serving" {
				r.addr, _ = m["addr"].(string)
			}
		}
	}
}

// runJob returns the run's Job, creating it as the agent-controller
// would when it does not exist yet: labelled as a run Job and controlled
// by the Agent. No Job controller runs here, so it starts no pod.
func (r *rtRun) runJob() *batchv1.Job {
	r.t.Helper()
	return r.jobControlledBy(&metav1.OwnerReference{APIVersion: agentsv1alpha1.GroupVersion.String(), Kind: "Agent",
		Name: r.agent.Name, UID: r.agent.UID, Controller: ptr.To(true)})
}

// jobControlledBy returns the Job of the run's name, creating it with
// controller (nil: no owner at all) when it does not exist yet.
func (r *rtRun) jobControlledBy(controller *metav1.OwnerReference) *batchv1.Job {
	r.t.Helper()
	name := agentsv1alpha1.JobNamePrefix + r.agent.Name
	ctx := context.Background()
	if j, err := env.Kube.BatchV1().Jobs(r.agent.Namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
		return j
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.agent.Namespace, Name: name,
			Labels: map[string]string{agentsv1alpha1.LabelComponent: agentsv1alpha1.ComponentJob}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: agentsv1alpha1.AgentContainerName, Image: "agent"}}}}},
	}
	if controller != nil {
		j.OwnerReferences = []metav1.OwnerReference{*controller}
	}
	j, err := env.Kube.BatchV1().Jobs(r.agent.Namespace).Create(ctx, j, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

// podAt creates the run's pod as the Job controller and the kubelet would
// leave it: controlled by the run's Job (runJob, unless the test created
// another first), labelled, Running and Ready at addr (pod IP and the
// container port named realtime). realtimeLabel false makes it an
// ordinary Job run's pod.
func (r *rtRun) podAt(addr string, realtimeLabel bool) *corev1.Pod {
	r.t.Helper()
	host, portS, err := net.SplitHostPort(addr)
	if err != nil {
		r.t.Fatal(err)
	}
	port, _ := strconv.Atoi(portS)
	runJob := r.runJob()
	job := runJob.Name
	labels := map[string]string{route.LabelJobName: job, route.LabelJobNameLegacy: job, agentsv1alpha1.LabelComponent: agentsv1alpha1.ComponentJob}
	if realtimeLabel {
		labels[agentsv1alpha1.LabelExecution] = string(agentsv1alpha1.ExecutionRealtime)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: r.agent.Namespace, Name: job + "-x7k2p", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, UID: runJob.UID, Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: agentsv1alpha1.AgentContainerName, Image: "agent",
				Ports: []corev1.ContainerPort{{Name: realtime.PortName, ContainerPort: int32(port)}}}},
		},
	}
	ctx := context.Background()
	p, err = env.Kube.CoreV1().Pods(r.agent.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: host, PodIPs: []corev1.PodIP{{IP: host}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if p, err = env.Kube.CoreV1().Pods(r.agent.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// setPhase writes the Agent's phase and Job name through the status
// subresource, as the controller does.
func (r *rtRun) setPhase(phase agentsv1alpha1.AgentPhase) {
	r.t.Helper()
	ctx := context.Background()
	a := &agentsv1alpha1.Agent{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: r.agent.Namespace, Name: r.agent.Name}, a); err != nil {
		r.t.Fatal(err)
	}
	a.Status.Phase, a.Status.JobName = phase, agentsv1alpha1.JobNamePrefix+r.agent.Name
	if err := env.Client.Status().Update(ctx, a); err != nil {
		r.t.Fatal(err)
	}
	r.agent = a
}

// running is a Running realtime Agent with its supervisor and pod.
func running(t *testing.T, ns, name string) *rtRun {
	t.Helper()
	r := newAgent(t, ns, name)
	r.serve()
	r.podAt(r.addr, true)
	r.setPhase(agentsv1alpha1.PhaseRunning)
	return r
}

// fresh re-reads the Agent.
func (r *rtRun) fresh() *agentsv1alpha1.Agent {
	r.t.Helper()
	a := &agentsv1alpha1.Agent{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: r.agent.Namespace, Name: r.agent.Name}, a); err != nil {
		r.t.Fatal(err)
	}
	return a
}

// cliStarts counts the CLI starts so far.
func (r *rtRun) cliStarts() int {
	b, err := os.ReadFile(r.starts)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("\n"))
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// readLines reads a file's lines; a missing file has none.
func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"), nil
}

var metav1UpdateOptions = metav1.UpdateOptions{}

// testutilCount reads realtime_gateway_prompts_total for code.
func testutilCount(g *liveGateway, code string) float64 {
	return testutil.ToFloat64(g.app.Metrics.PromptsTotal.WithLabelValues(code))
}

// shortHash names an object after a test case, briefly.
func shortHash(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return strconv.FormatUint(uint64(h.Sum32()), 36)
}
