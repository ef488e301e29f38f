package controller

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// TestAgentIndexes: a run's end reads its Station's finished runs by phase
// and its runs waiting for a slot from indexes, so each index must hold
// exactly those.
func TestAgentIndexes(t *testing.T) {
	run := func(phase agentsv1alpha1.AgentPhase, fallback bool, job string) *agentsv1alpha1.Agent {
		return &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"},
			Spec:   agentsv1alpha1.AgentSpec{StationRef: "st"},
			Status: agentsv1alpha1.AgentStatus{Phase: phase, BatchFallback: fallback, JobName: job}}
	}
	cases := []struct {
		name              string
		agent             any
		finished, waiting []string
	}{
		{"a new run waits for a slot", run("", false, ""), nil, []string{"ns/st"}},
		{"a Pending run waits for a slot", run(agentsv1alpha1.PhasePending, false, ""), nil, []string{"ns/st"}},
		{"a Running run is in neither", run(agentsv1alpha1.PhaseRunning, false, "j"), nil, nil},
		{"a batch fallback without its Job waits", run(agentsv1alpha1.PhaseRunning, true, ""), nil, []string{"ns/st"}},
		{"a Succeeded run is its Station's Succeeded history", run(agentsv1alpha1.PhaseSucceeded, false, "j"), []string{"ns/st/Succeeded"}, nil},
		{"a Failed run is its Station's Failed history", run(agentsv1alpha1.PhaseFailed, true, ""), []string{"ns/st/Failed"}, nil},
		{"an object of another kind is in neither", &metav1.PartialObjectMetadata{}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			finished, _ := finishedIndex(tc.agent)
			waiting, _ := waitingIndex(tc.agent)
			if !slices.Equal(finished, tc.finished) || !slices.Equal(waiting, tc.waiting) {
				t.Errorf("finished %v, waiting %v; want %v, %v", finished, waiting, tc.finished, tc.waiting)
			}
		})
	}
}
