package v1alpha1

// The skills an AgentRuntime's pods receive from the PromptPack version
// they run (docs/omnia-controllers.md, "Skills reach the pod").
const (
	// ConditionSkillsReady: the skills the agent's PromptPack declares
	// resolved against Ready SkillSources and are mounted. False says what
	// is wrong, naming the SkillSource; no skill is mounted then (never a
	// partial set). Absent when the pack declares no skills.
	ConditionSkillsReady = "SkillsReady"

	// ReasonSkillsMounted: every declared skill is mounted.
	ReasonSkillsMounted = "SkillsMounted"
	// ReasonSkillsNotReady: a SkillSource is missing or not Ready, an
	// included skill is missing, two sources supply one name, or a skill
	// allows a tool pack.json does not declare; as in the pack's
	// status.skills, no skill is mounted then.
	ReasonSkillsNotReady = "SkillsNotReady"
	// ReasonSkillSourcePending: a SkillSource the pack names has not been
	// judged yet; the agent waits (Pending) rather than build pods that
	// would roll again moments later.
	ReasonSkillSourcePending = "SkillSourcePending"

	// EventSkillsNotReady is emitted when SkillsReady turns False.
	EventSkillsNotReady = "SkillsNotReady"
)
