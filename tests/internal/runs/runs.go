// Package runs holds what the end-to-end suites do with Agents alike.
package runs

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// WaitFor polls the Agent ns/name until cond holds and returns it. After
// within it calls diagnose (when not nil) and fails t, naming what it
// waited for and the Agent's last status.
func WaitFor(t testing.TB, c client.Client, ns, name string, within time.Duration, what string,
	cond func(*agentsv1alpha1.Agent) bool, diagnose func()) *agentsv1alpha1.Agent {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		a := &agentsv1alpha1.Agent{}
		err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, a)
		if err == nil && cond(a) {
			return a
		}
		if time.Now().After(deadline) {
			if diagnose != nil {
				diagnose()
			}
			t.Fatalf("agent %s/%s: %s not seen after %s (last error %v); status %+v", ns, name, what, within, err, a.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Connect connects to the NATS server at natsURL with opts and returns
// the connection, for the caller to close, and its JetStream API.
func Connect(t *testing.T, natsURL string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(natsURL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	return nc, js
}

// Stored reads every event of one run from the AGENT_EVENTS stream at
// natsURL, in stream order, connecting with opts (the stack's service
// credential: the stack's server admits no anonymous client).
func Stored(t *testing.T, natsURL, ns, agent string, opts ...nats.Option) []*eventsv1.RunEvent {
	t.Helper()
	nc, js := Connect(t, natsURL, opts...)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, err := events.ReadAll(ctx, js, events.Filter{Namespace: ns, Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}
