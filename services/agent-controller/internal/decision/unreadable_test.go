package decision

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

func TestRefUnreadable(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name, kind, wantCond string
	}{
		{"an unreadable Station fails the run with StationUnreadable", "Station", agentsv1alpha1.ReasonStationUnreadable},
		{"an unreadable AgentDefinition fails the run with AgentDefinitionUnreadable", "AgentDefinition", agentsv1alpha1.ReasonAgentDefinitionUnreadable},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Generation: 2}}
			reason := c.kind + ` "x" cannot be read: spec.template.spec.containers[0].resources.limits.memory: quantities must match`
			plan := RefUnreadable(Snapshot{Now: now, Agent: a}, c.kind, reason)
			st := plan.Status
			if st == nil || st.Phase != agentsv1alpha1.PhaseFailed || st.FailureReason != reason {
				t.Fatalf("status %+v, want Failed with the reason", st)
			}
			cond := meta.FindStatusCondition(st.Conditions, agentsv1alpha1.ConditionResolved)
			if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != c.wantCond || cond.Message != reason {
				t.Errorf("Resolved condition %+v, want False/%s with the reason", cond, c.wantCond)
			}
			if plan.Outcome.Terminal != agentsv1alpha1.PhaseFailed || plan.Outcome.Failure != FailureInvalidSpec {
				t.Errorf("outcome %+v, want a Failed invalid_spec run", plan.Outcome)
			}
			if plan.CreateJob != nil || plan.Submit != nil {
				t.Error("an unreadable reference must never start the run")
			}
		})
	}
}
