package main

import (
	"testing"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/session"
)

// TestSessionIDPatchIsGuardedByResourceVersion: the patch carries the
// resourceVersion of the Agent as read, so a write made in between is
// never overwritten blindly: on the conflict the Agent is read again and
// the id written only if it is still different and the run still going.
func TestSessionIDPatchIsGuardedByResourceVersion(t *testing.T) {
	ns := env.Namespace(t)
	p := session.NewPatcher(env.Client)
	for _, tc := range []struct {
		name string
		// meanwhile is what the controller writes after the gateway read
		// the Agent.
		meanwhile func(a *agentsv1alpha1.Agent)
		wrote     bool
		want      string
	}{
		{"an unchanged Agent is patched at once", nil, true, "sess-new"},
		{"a stale read is retried after the conflict", func(a *agentsv1alpha1.Agent) { a.Status.Output = "progress" }, true, "sess-new"},
		{"an id someone else already recorded is not written again", func(a *agentsv1alpha1.Agent) { a.Status.SessionID = "sess-new" }, false, "sess-new"},
		{"a run that finished meanwhile keeps the controller's id", func(a *agentsv1alpha1.Agent) {
			a.Status.Phase, a.Status.SessionID = agentsv1alpha1.PhaseSucceeded, "sess-final"
		}, false, "sess-final"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			r := newAgent(t, ns, "a-"+shortHash(tc.name))
			r.setPhase(agentsv1alpha1.PhaseRunning)
			read := r.fresh()
			if tc.meanwhile != nil {
				a := r.fresh()
				tc.meanwhile(a)
				if err := env.Client.Status().Update(ctx, a); err != nil {
					t.Fatal(err)
				}
			}
			before := r.fresh()
			wrote, err := p.Record(ctx, read, "sess-new")
			if err != nil || wrote != tc.wrote {
				t.Fatalf("Record = %v, %v; want wrote=%v", wrote, err, tc.wrote)
			}
			after := r.fresh()
			if after.Status.SessionID != tc.want {
				t.Fatalf("status.sessionId %q, want %q", after.Status.SessionID, tc.want)
			}
			if !tc.wrote && after.ResourceVersion != before.ResourceVersion {
				t.Fatal("the Agent was written though nothing had to change")
			}
			if before.Status.Output != after.Status.Output || before.Status.Phase != after.Status.Phase {
				t.Fatalf("the patch touched other fields: %+v → %+v", before.Status, after.Status)
			}
		})
	}
}
