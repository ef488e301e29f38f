package decision

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

func TestPruneVictims(t *testing.T) {
	done := func(name string, phase agentsv1alpha1.AgentPhase, minutesAgo int) *agentsv1alpha1.Agent {
		a := agent(name, phase)
		a.Status.CompletedAt = &metav1.Time{Time: t0.Add(-time.Duration(minutesAgo) * time.Minute)}
		return a
	}
	st := station("", 0)
	st.Spec.SuccessfulRunsHistoryLimit = ptr.To[int32](2)
	st.Spec.FailedRunsHistoryLimit = ptr.To[int32](0)
	other := done("other-station", agentsv1alpha1.PhaseSucceeded, 99)
	other.Spec.StationRef = "elsewhere"
	runs := []*agentsv1alpha1.Agent{
		done("s-new", agentsv1alpha1.PhaseSucceeded, 1), done("s-old", agentsv1alpha1.PhaseSucceeded, 30),
		// 9 minutes ago sorts before 10 minutes ago even though "10" < "9" as text.
		done("s-mid", agentsv1alpha1.PhaseSucceeded, 9), done("s-10", agentsv1alpha1.PhaseSucceeded, 10),
		done("f-1", agentsv1alpha1.PhaseFailed, 1), agent("running", agentsv1alpha1.PhaseRunning), other,
	}
	var got []string
	for _, v := range PruneVictims(st, runs) {
		got = append(got, v.Name)
	}
	if want := "s-10,s-old,f-1"; strings.Join(got, ",") != want {
		t.Fatalf("pruned %v, want %s: keep the newest per phase by completedAt as times, never Running runs or other Stations", got, want)
	}
}

func TestWaitsForSlot(t *testing.T) {
	cases := []struct {
		name   string
		status agentsv1alpha1.AgentStatus
		want   bool
	}{
		{"a new run waits", agentsv1alpha1.AgentStatus{}, true},
		{"a Pending run waits", agentsv1alpha1.AgentStatus{Phase: agentsv1alpha1.PhasePending}, true},
		{"a Running run holds its slot", agentsv1alpha1.AgentStatus{Phase: agentsv1alpha1.PhaseRunning, JobName: "j"}, false},
		{"a batch fallback without its Job waits", agentsv1alpha1.AgentStatus{Phase: agentsv1alpha1.PhaseRunning, BatchFallback: true}, true},
		{"a batch fallback with its Job holds its slot", agentsv1alpha1.AgentStatus{Phase: agentsv1alpha1.PhaseRunning, BatchFallback: true, JobName: "j"}, false},
		{"a Succeeded run waits for nothing", agentsv1alpha1.AgentStatus{Phase: agentsv1alpha1.PhaseSucceeded}, false},
		{"a Failed run waits for nothing", agentsv1alpha1.AgentStatus{Phase: agentsv1alpha1.PhaseFailed, BatchFallback: true}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := WaitsForSlot(&agentsv1alpha1.Agent{Status: tc.status}); got != tc.want {
				t.Errorf("WaitsForSlot = %v, want %v", got, tc.want)
			}
		})
	}
}
