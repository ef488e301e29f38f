package decision

import (
	"github.com/agentplane/agentplane/libs/vendors"
)

// Run names a run as the controller's metrics label it
// (docs/agent-controller.md, "Metrics").
type Run struct {
	// Namespace is the Agent's namespace.
	Namespace string
	// Station is the Station the Agent names; empty when it names none.
	Station string
	// Vendor is the vendor whose CLI or batch API carries the run
	// (vendors.NameClaude, ...).
	Vendor string
}

// RunOf names the run s is about. Its vendor is routed from the model
// frozen into its Job when it has one, since the definition may have
// changed since the Job was built; otherwise from the model it resolves to
// now (the Agent's, its definition's, the default), which is the model a
// Job built in this pass, or a batch submitted in it, uses.
func RunOf(s Snapshot) Run {
	r := Run{Namespace: s.Agent.Namespace, Station: s.Agent.Spec.StationRef}
	model := s.Agent.EffectiveModel(s.Definition)
	if s.Job != nil {
		if s.Job.FrozenSpec && s.Job.Model != "" {
			model = s.Job.Model
		}
	}
	r.Vendor = vendors.Route(model).Name()
	return r
}
