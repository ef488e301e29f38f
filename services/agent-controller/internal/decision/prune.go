package decision

import (
	"sort"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// PruneVictims returns the finished Agents of station to delete: per
// terminal phase, newest first by completedAt (compared as times), those
// beyond the Station's successfulRunsHistoryLimit / failedRunsHistoryLimit.
// runs are the cached Agents; runs of other Stations are ignored.
func PruneVictims(station *agentsv1alpha1.Station, runs []*agentsv1alpha1.Agent) []Victim {
	byPhase := map[agentsv1alpha1.AgentPhase][]*agentsv1alpha1.Agent{}
	for _, r := range runs {
		if r.Spec.StationRef != station.Name || r.Namespace != station.Namespace || r.DeletionTimestamp != nil {
			continue
		}
		if r.Status.Phase.IsTerminal() {
			byPhase[r.Status.Phase] = append(byPhase[r.Status.Phase], r)
		}
	}
	var victims []Victim
	for _, phase := range []agentsv1alpha1.AgentPhase{agentsv1alpha1.PhaseSucceeded, agentsv1alpha1.PhaseFailed} {
		limit, _ := station.Spec.HistoryLimit(phase)
		list := byPhase[phase]
		if len(list) <= limit {
			continue
		}
		sort.SliceStable(list, func(i, j int) bool { return completedAfter(list[i], list[j]) })
		for _, r := range list[limit:] {
			victims = append(victims, Victim{Name: r.Name, ResourceVersion: r.ResourceVersion})
		}
	}
	return victims
}

// completedAfter orders newest first; a run without completedAt counts as
// oldest, ties broken by name so the result is stable.
func completedAfter(x, y *agentsv1alpha1.Agent) bool {
	xc, yc := x.Status.CompletedAt, y.Status.CompletedAt
	switch {
	case xc == nil && yc == nil:
		return x.Name > y.Name
	case xc == nil:
		return false
	case yc == nil:
		return true
	case !xc.Equal(yc):
		return yc.Before(xc)
	}
	return x.Name > y.Name
}
