package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/testenv"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, testenv.Options{})) }

func kubeconfig(t *testing.T) string {
	t.Helper()
	raw, err := env.KubeconfigFor("agentctl")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// agentctl runs the CLI in-process and returns its output and exit code.
func agentctl(t *testing.T, args ...string) (string, int) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	code := 0
	var ec *exitCodeError
	switch {
	case errors.As(err, &ec):
		code = ec.code
		out.WriteString(ec.msg)
	case err != nil:
		code = exitError
		out.WriteString(err.Error())
	}
	return out.String(), code
}

// finishLater plays the controller: it moves the only Agent of ns to phase
// with exit code once it exists.
func finishLater(t *testing.T, ns string, phase agentsv1alpha1.AgentPhase, exit *int32) {
	go func() {
		for i := 0; i < 200; i++ {
			list := &agentsv1alpha1.AgentList{}
			if err := env.Client.List(context.Background(), list); err == nil {
				for _, a := range list.Items {
					if a.Namespace == ns {
						a.Status.Phase, a.Status.ExitCode = phase, exit
						_ = env.Client.Status().Update(context.Background(), &a)
						return
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
}

func mkStation(t *testing.T, ns string) {
	t.Helper()
	st := &agentsv1alpha1.Station{Spec: agentsv1alpha1.StationSpec{AgentDefRef: "def"}}
	st.Name, st.Namespace = "st", ns
	st.Spec.Template.Spec.Containers = []corev1.Container{{Name: "agent", Image: "x"}}
	if err := env.Client.Create(context.Background(), st); err != nil {
		t.Fatal(err)
	}
}

func TestRunWaitExitCodes(t *testing.T) {
	cases := []struct {
		rule  string
		phase agentsv1alpha1.AgentPhase
		exit  *int32
		want  int
	}{
		{"a Succeeded run exits 0", agentsv1alpha1.PhaseSucceeded, ptr.To[int32](0), 0},
		{"a Failed run exits with the run's exit code", agentsv1alpha1.PhaseFailed, ptr.To[int32](7), 7},
		{"a Failed run without an exit code exits with a distinct code", agentsv1alpha1.PhaseFailed, nil, exitFailedNoCode},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			ns := env.Namespace(t)
			mkStation(t, ns)
			finishLater(t, ns, c.phase, c.exit)
			out, code := agentctl(t, "--kubeconfig", kubeconfig(t), "-n", ns, "--nats-url", "nats://127.0.0.1:1", "run", "--station", "st", "--param", "issue=42", "--wait", "--timeout", "30s")
			if code != c.want {
				t.Fatalf("exit %d, want %d:\n%s", code, c.want, out)
			}
			if !strings.Contains(out, "created in namespace "+ns) || !strings.Contains(out, string(c.phase)) {
				t.Errorf("output:\n%s", out)
			}
		})
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	for _, args := range [][]string{{"run"}, {"run", "--station", "st", "--param", "novalue"}} {
		if _, code := agentctl(t, append([]string{"--kubeconfig", kubeconfig(t)}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

func TestRunTimesOut(t *testing.T) {
	ns := env.Namespace(t)
	mkStation(t, ns)
	_, code := agentctl(t, "--kubeconfig", kubeconfig(t), "-n", ns, "run", "--station", "st", "--wait", "--timeout", "1s")
	if code != exitTimeout {
		t.Fatalf("exit %d, want %d", code, exitTimeout)
	}
}

// TestFollowPrintsEventsFromTheFirstOne publishes a run's events before
// and while agentctl follows; every one is printed, in order.
func TestFollowPrintsEventsFromTheFirstOne(t *testing.T) {
	srv := eventstest.Start(t)
	ns := env.Namespace(t)
	mkStation(t, ns)
	pub, err := events.NewPublisher(events.PublisherOptions{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pub.Close(context.Background()) }()
	// The Agent's name is generated; learn it, publish, then finish it.
	go func() {
		for i := 0; i < 200; i++ {
			list := &agentsv1alpha1.AgentList{}
			if err := env.Client.List(context.Background(), list); err == nil {
				for _, a := range list.Items {
					if a.Namespace != ns {
						continue
					}
					run := events.NewRun(&eventsv1.RunIdentity{Namespace: ns, Agent: a.Name, Uid: string(a.UID)})
					pub.Publish(run.Lifecycle(&eventsv1.Lifecycle{Phase: "agent", Status: "started"}))
					pub.Publish(run.Stamp(&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_ToolCall{ToolCall: &eventsv1.ToolCall{Name: "Read"}}}))
					pub.Publish(run.Lifecycle(&eventsv1.Lifecycle{Phase: "agent", Status: "succeeded", ExitCode: ptr.To[int32](0)}))
					time.Sleep(500 * time.Millisecond)
					cur := &agentsv1alpha1.Agent{}
					_ = env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: a.Name}, cur)
					cur.Status.Phase, cur.Status.ExitCode = agentsv1alpha1.PhaseSucceeded, ptr.To[int32](0)
					_ = env.Client.Status().Update(context.Background(), cur)
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	out, code := agentctl(t, "--kubeconfig", kubeconfig(t), "-n", ns, "--nats-url", srv.URL(), "run", "--station", "st", "--follow", "--wait", "--timeout", "30s")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	i1, i2, i3 := strings.Index(out, "agent/started"), strings.Index(out, "tool_call   Read"), strings.Index(out, "agent/succeeded")
	if i1 < 0 || i2 < i1 || i3 < i2 {
		t.Fatalf("events missing or out of order:\n%s", out)
	}
}

func TestClearErrors(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t)
	cases := []struct {
		rule string
		args []string
		code int
		want string
	}{
		{"a missing Station is named before anything is created", []string{"--kubeconfig", kc, "-n", ns, "run", "--station", "nope"}, exitError, `Station "nope" not found`},
		{"a --param without = is a usage error", []string{"--kubeconfig", kc, "run", "--station", "st", "--param", "novalue"}, exitUsage, "want key=value"},
		{"an unknown output format is a usage error", []string{"--kubeconfig", kc, "-n", ns, "get", "-o", "xml"}, exitUsage, `-o "xml"`},
		{"an unreachable API server says what it was doing", []string{"--kubeconfig", unreachable(t), "-n", ns, "run", "--station", "st"}, exitError, "reach the API server"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			out, code := agentctl(t, c.args...)
			if code != c.code || !strings.Contains(out, c.want) {
				t.Fatalf("exit %d, want %d; output %q, want %q", code, c.code, out, c.want)
			}
		})
	}
	list := &agentsv1alpha1.AgentList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("refused runs created Agents: %v %d", err, len(list.Items))
	}
}

// unreachable writes a kubeconfig pointing at a closed port.
func unreachable(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	raw := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
	if err := os.WriteFile(p, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGetListAndCancel(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t)
	a := &agentsv1alpha1.Agent{Spec: agentsv1alpha1.AgentSpec{StationRef: "st"}}
	a.Name, a.Namespace = "one", ns
	if err := env.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	a.Status.Phase, a.Status.JobName = agentsv1alpha1.PhaseRunning, "agent-job-one"
	if err := env.Client.Status().Update(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	out, code := agentctl(t, "--kubeconfig", kc, "-n", ns, "get")
	if code != 0 || !strings.Contains(out, "NAME") || !strings.Contains(out, "PHASE") || !strings.Contains(out, "agent-job-one") {
		t.Fatalf("table:\n%s", out)
	}
	out, code = agentctl(t, "--kubeconfig", kc, "-n", ns, "list", "-o", "json")
	if code != 0 || !strings.Contains(out, `"stationRef": "st"`) {
		t.Fatalf("json:\n%s", out)
	}
	if out, code = agentctl(t, "--kubeconfig", kc, "-n", ns, "cancel", "one"); code != 0 {
		t.Fatalf("cancel: %s", out)
	}
	if out, code = agentctl(t, "--kubeconfig", kc, "-n", ns, "get", "one"); code == 0 {
		t.Fatalf("the cancelled Agent still exists:\n%s", out)
	}
}
