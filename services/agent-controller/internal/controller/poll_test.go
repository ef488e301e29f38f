package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

func cachedAgent(name, rv string, phase agentsv1alpha1.AgentPhase) *agentsv1alpha1.Agent {
	return &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv},
		Spec: agentsv1alpha1.AgentSpec{StationRef: "st"}, Status: agentsv1alpha1.AgentStatus{Phase: phase}}
}

func TestCacheRules(t *testing.T) {
	ctl := New(nil, nil, metrics.New(), Options{Log: quiet})
	idx := ctl.agents.GetIndexer()
	ctl.storeIfNewer(cachedAgent("a", "10", agentsv1alpha1.PhaseRunning))
	ctl.storeIfNewer(cachedAgent("a", "9", agentsv1alpha1.PhasePending))
	if got, _, _ := idx.GetByKey("ns/a"); got.(*agentsv1alpha1.Agent).ResourceVersion != "10" {
		t.Error("an older version from a LIST must not replace a newer cached one")
	}
	ctl.storeIfNewer(cachedAgent("a", "11", agentsv1alpha1.PhaseSucceeded))
	if got, _, _ := idx.GetByKey("ns/a"); got.(*agentsv1alpha1.Agent).ResourceVersion != "11" {
		t.Error("a newer version replaces the cached one")
	}
	ctl.storeIfNewer(cachedAgent("gone", "5", agentsv1alpha1.PhaseRunning))
	ctl.storeIfNewer(cachedAgent("fresh", "30", agentsv1alpha1.PhasePending))
	ctl.evictMissing(map[string]bool{"ns/a": true}, "20")
	if _, ok, _ := idx.GetByKey("ns/gone"); ok {
		t.Error("an Agent missing from a newer LIST is evicted (its deletion was missed)")
	}
	if _, ok, _ := idx.GetByKey("ns/fresh"); !ok {
		t.Error("an Agent newer than the LIST is kept (created after it)")
	}
	if runs := ctl.cachedRuns("ns", "st"); len(runs) != 2 {
		t.Errorf("the Station index holds %d runs, want 2", len(runs))
	}
}

func TestInflightCounting(t *testing.T) {
	var f inflight
	f.byStation = map[string]map[string]bool{}
	f.add("ns/st", "a")
	f.add("ns/st", "b")
	runs := []*agentsv1alpha1.Agent{cachedAgent("a", "1", agentsv1alpha1.PhasePending), cachedAgent("b", "1", agentsv1alpha1.PhaseRunning)}
	if n := f.count("ns/st", "", runs); n != 1 {
		t.Errorf("a run the cache shows Running is counted there, not in flight: got %d", n)
	}
	if n := f.count("ns/st", "a", runs); n != 0 {
		t.Errorf("the Agent being reconciled never counts against itself: got %d", n)
	}
	f.forget("ns/a")
	if n := f.count("ns/st", "", runs); n != 0 {
		t.Errorf("a deleted Agent is forgotten: got %d", n)
	}
}
