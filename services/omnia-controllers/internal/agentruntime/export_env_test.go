package agentruntime

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// This file exports helpers to the external tests of this directory
// (package agentruntime_test): the activator's end-to-end test imports
// the activator package, which imports this one, so it cannot live in
// this package.

// EnvForTest is the package's control plane.
func EnvForTest() *testenv.Env { return env }

// ReapedAgentForTest runs the controllers on a test clock with an
// activator at addr:port, creates an idle agent "agent" (mut, when not
// nil, changes it), plays the kubelet for its pods until it is Running,
// and reaps it: its Deployment at zero and its pods gone. It returns the
// namespace, the manager's client (what the activator reads through in
// the binary) and a function that plays the kubelet for the agent's
// pods again.
func ReapedAgentForTest(t *testing.T, addr string, port int32, mut func(*omniav1.AgentRuntime)) (string, client.Client, func()) {
	t.Helper()
	ns, clock := env.Namespace(t), newTestClock()
	var c client.Client
	res := startTimed(t, clock, func(r *Reconciler) {
		r.Config.ActivatorAddress, r.Config.ActivatorPort = addr, port
		c = r.Client
	})
	idleAgent(t, ns, clock, mut)
	markPodsReady(t, ns, "agent")
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhaseRunning, omniav1.ConditionReady, omniav1.ReasonRuntimeReady))
	reap(t, ns, clock, res)
	ctrltest.Eventually(t, wait, func() error {
		if ps := pods(t, ns, "agent"); len(ps) > 0 {
			return errPodsLeft
		}
		return nil
	})
	return ns, c, func() { markPodsReady(t, ns, "agent") }
}

type testError string

func (e testError) Error() string { return string(e) }

const errPodsLeft = testError("the reaped agent's pods are still there")
