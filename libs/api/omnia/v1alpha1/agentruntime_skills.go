package v1alpha1

// The skills an AgentRuntime's pods receive from the PromptPack version
// they run (docs/omnia-controllers.md, "Skills reach the pod").
const (
	// ConditionSkillsReady: every skill the agent's PromptPack declares is
	// resolved, and each one's SkillSource is Ready and still offers it, so
	// every skill is mounted. False names each SkillSource (or the pack's
	// own resolution) that is not, whose skills are left out of the pods.
	// Absent when the pack declares no skills.
	ConditionSkillsReady = "SkillsReady"

	// ReasonSkillsMounted: every declared skill is mounted.
	ReasonSkillsMounted = "SkillsMounted"
	// ReasonSkillsNotReady: a SkillSource is missing, not Ready or no
	// longer offers a skill, or the pack resolved no skills; those skills
	// are left out.
	ReasonSkillsNotReady = "SkillsNotReady"

	// EventSkillsNotReady is emitted when SkillsReady turns False.
	EventSkillsNotReady = "SkillsNotReady"
)
