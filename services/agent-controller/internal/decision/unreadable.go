package decision

import (
	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// RefUnreadable is the plan when the Agent's Station or AgentDefinition
// (kind) exists but cannot be decoded: a value its type refuses, stored
// before admission checked it. As with a missing reference the run fails
// before it starts, with reason naming the object and the field: it could
// only start once someone fixes that object, and a Failed Agent says so
// where a waiting one would not.
func RefUnreadable(s Snapshot, kind, reason string) Plan {
	cond := agentsv1alpha1.ReasonStationUnreadable
	if kind == "AgentDefinition" {
		cond = agentsv1alpha1.ReasonAgentDefinitionUnreadable
	}
	return fail(s, reason, FailureInvalidSpec, cond)
}
