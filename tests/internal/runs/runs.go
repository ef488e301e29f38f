// Package runs holds what the end-to-end suites do with Agents alike.
package runs

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
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
