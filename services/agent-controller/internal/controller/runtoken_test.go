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
