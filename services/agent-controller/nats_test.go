package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/testenv"
)

// TestRunsPublishWithTheCredentialTheBinaryMints runs the binary's run
// loop with the platform account's signing key against a NATS server that
// admits only that account's users: the controller creates the event
// stream with its own service credential (a run's credential may not),
// and a run's Secret holds a credential the server accepts for that run's
// events and refuses for another run's.
func TestRunsPublishWithTheCredentialTheBinaryMints(t *testing.T) {
	srv, natsArgs := securedNATS(t)
	raw, err := env.KubeconfigFor("nats-minter")
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	startRun(t, append([]string{
		"--kubeconfig=" + eventstest.WriteFile(t, "kubeconfig", raw), "--pod-name=minter", "--pod-namespace=" + ns, "--watch-namespace=" + ns,
		"--metrics-bind-address=" + testenv.FreeAddr(t), "--health-probe-bind-address=" + testenv.FreeAddr(t), "--shutdown-timeout=5s",
		"--leader-elect=false", "--poll-interval=1s"}, natsArgs...)...)

	ctx := context.Background()
	eventually(t, "the event stream created by the controller", func() error {
		_, err := srv.JetStream().Stream(ctx, events.StreamName)
		return err
	})

	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: agentsv1alpha1.AgentContainerName, Image: "runner"}}}}
	for _, o := range []client.Object{
		&agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "def", Namespace: ns},
			Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "go"}},
		&agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: "st", Namespace: ns},
			Spec: agentsv1alpha1.StationSpec{AgentDefRef: "def", DeadlineMinutes: 30, Template: template}},
		&agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: ns}, Spec: agentsv1alpha1.AgentSpec{StationRef: "st"}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the run Running", phaseIs(ns, "run", agentsv1alpha1.PhaseRunning))
	a, err := agentIn(ns, "run")
	if err != nil {
		t.Fatal(err)
	}
	sec, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, runspec.NATSSecretName(string(a.UID)), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the run's NATS Secret: %v", err)
	}
	creds := eventstest.WriteCreds(t, sec.Data[runspec.NATSCredsKey])
	nc, err := nats.Connect(srv.URL(), (&natsauth.Client{CredsFile: creds, InboxPrefix: natsauth.InboxPrefix(string(a.UID))}).Options()...)
	if err != nil {
		t.Fatalf("the run's credential is refused: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	subject := func(agent string) string {
		return strings.TrimSuffix(events.Filter{Namespace: ns, Agent: agent}.Subject(), ">") + "lifecycle"
	}
	if _, err := js.Publish(pctx, subject("run"), []byte("{}")); err != nil {
		t.Errorf("publishing the run's own event: %v", err)
	}
	if _, err := js.Publish(pctx, subject("other"), []byte("{}")); err == nil {
		t.Error("the run's credential published another run's event")
	}
}
