package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// startRealtime runs a controller with the realtime component, its shared
// key in keyNS.
func startRealtime(t *testing.T, ns, keyNS string) {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctl := New(c, env.Kube, metrics.New(), Options{Namespace: ns, PollInterval: 2 * time.Second, Log: quiet,
		RealtimeKeyNamespace: keyNS, Reconcile: decision.Config{RealtimeEnabled: true}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func realtimeStation(t *testing.T, ns string) {
	mkStation(t, ns, "chat", nil)
	def := &agentsv1alpha1.AgentDefinition{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "chat-def"}, def); err != nil {
		t.Fatal(err)
	}
	def.Spec.Execution = agentsv1alpha1.ExecutionRealtime
	if err := env.Client.Update(context.Background(), def); err != nil {
		t.Fatal(err)
	}
}

func TestARealtimeRunGetsItsTokenFromASecretItOwns(t *testing.T) {
	ns := env.Namespace(t)
	key := []byte(strings.Repeat("k", 32))
	if err := env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: realtime.KeySecretName, Namespace: ns},
		Data: map[string][]byte{realtime.KeySecretKey: key}}); err != nil {
		t.Fatal(err)
	}
	realtimeStation(t, ns)
	startRealtime(t, ns, ns)
	mkAgent(t, ns, "talk", "chat")
	a := waitPhase(t, ns, "talk", agentsv1alpha1.PhaseRunning)

	sec, err := env.Kube.CoreV1().Secrets(ns).Get(context.Background(), realtime.TokenSecretName(string(a.UID)), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the run's token Secret: %v", err)
	}
	if !realtime.Verify(key, string(a.UID), string(sec.Data[realtime.TokenSecretKey])) {
		t.Error("the token is not the keyed hash of the Agent's uid")
	}
	if string(sec.Data[realtime.TokenSecretKey]) == string(a.UID) {
		t.Error("the token is the uid itself")
	}
	if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != a.UID {
		t.Errorf("the token Secret is owned by the Agent: %+v", sec.OwnerReferences)
	}
	job, err := env.Kube.BatchV1().Jobs(ns).Get(context.Background(), a.Status.JobName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw := job.String()
	if strings.Contains(raw, string(sec.Data[realtime.TokenSecretKey])) {
		t.Error("the token is readable from the Job spec")
	}
	if job.Spec.Template.Labels[agentsv1alpha1.LabelExecution] != "realtime" {
		t.Error("the pod carries the agents.re-cinq.com/execution: realtime label")
	}
}

func TestARealtimeRunFailsWithoutTheSharedKey(t *testing.T) {
	ns := env.Namespace(t)
	realtimeStation(t, ns)
	startRealtime(t, ns, ns)
	mkAgent(t, ns, "talk", "chat")
	a := waitPhase(t, ns, "talk", agentsv1alpha1.PhaseFailed)
	if !strings.Contains(a.Status.FailureReason, realtime.KeySecretName) || a.Status.JobName != "" {
		t.Errorf("status %+v", a.Status)
	}
}

// TestAForeignTokenSecretIsNeverMounted is the attack of a namespace user
// who creates a realtime run's token Secret before the controller does,
// with a token they know, to answer the session's prompts or read its
// replies: the run must fail, naming the Secret, without a Job ever
// mounting it, whatever owner reference the Secret claims. A Secret an
// earlier pass wrote is the run's, and is used.
func TestAForeignTokenSecretIsNeverMounted(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	cases := []struct {
		rule string
		// forge returns the Secret to plant for Agent a.
		forge func(t *testing.T, ns string, a *agentsv1alpha1.Agent) *corev1.Secret
		// why is how the failure reason describes it; empty when the
		// Secret is the run's and the run starts.
		why string
	}{
		{"a Secret without an owner", func(t *testing.T, ns string, a *agentsv1alpha1.Agent) *corev1.Secret {
			return forgedSecret(ns, realtime.TokenSecretName(string(a.UID)), nil, true, map[string][]byte{realtime.TokenSecretKey: []byte("known-token")})
		}, "is not controlled by this Agent (uid "},
		{"a Secret claiming this Agent as controller, with a token of the attacker's choosing", func(t *testing.T, ns string, a *agentsv1alpha1.Agent) *corev1.Secret {
			return forgedSecret(ns, realtime.TokenSecretName(string(a.UID)), controllerRef(a), true, map[string][]byte{realtime.TokenSecretKey: []byte("known-token")})
		}, "is controlled by this Agent but was not written by the controller: its token is not the one the shared key gives this run"},
		{"a Secret claiming this Agent as controller, mutable", func(t *testing.T, ns string, a *agentsv1alpha1.Agent) *corev1.Secret {
			return forgedSecret(ns, realtime.TokenSecretName(string(a.UID)), controllerRef(a), false,
				map[string][]byte{realtime.TokenSecretKey: []byte(realtime.Token(key, string(a.UID)))})
		}, "is controlled by this Agent but mutable"},
		{"the Secret an earlier pass wrote is reused", func(t *testing.T, ns string, a *agentsv1alpha1.Agent) *corev1.Secret {
			return runSecret(a, realtime.TokenSecretName(string(a.UID)), map[string][]byte{realtime.TokenSecretKey: []byte(realtime.Token(key, string(a.UID)))})
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			ns := env.Namespace(t)
			if err := env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: realtime.KeySecretName, Namespace: ns},
				Data: map[string][]byte{realtime.KeySecretKey: key}}); err != nil {
				t.Fatal(err)
			}
			realtimeStation(t, ns)
			mkAgent(t, ns, "talk", "chat")
			a := getAgent(t, ns, "talk")
			forged := c.forge(t, ns, a)
			if _, err := env.Kube.CoreV1().Secrets(ns).Create(context.Background(), forged, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			startRealtime(t, ns, ns)
			if c.why != "" {
				wantSecretTaken(t, ns, "talk", forged.Name, c.why)
				return
			}
			a = waitPhase(t, ns, "talk", agentsv1alpha1.PhaseRunning)
			sec, err := env.Kube.CoreV1().Secrets(ns).Get(context.Background(), forged.Name, metav1.GetOptions{})
			if err != nil || !realtime.Verify(key, string(a.UID), string(sec.Data[realtime.TokenSecretKey])) {
				t.Errorf("the run's token Secret: %v", err)
			}
		})
	}
}
