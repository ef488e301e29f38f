package v1alpha1

// PromptPack condition types, set on PromptPack status.conditions.
const (
	// ConditionSourceValid: the source resolves — the ConfigMap exists and
	// has a pack.json key, or the source is live.
	ConditionSourceValid = "SourceValid"
	// ConditionSchemaValid: pack.json conforms to the PromptPack JSON Schema.
	// Unknown while the source is invalid or for a live source.
	ConditionSchemaValid = "SchemaValid"
	// ConditionAgentsNotified reports how many AgentRuntimes reference this
	// version; nothing is pushed to them (they watch PromptPacks).
	ConditionAgentsNotified = "AgentsNotified"
	// ConditionSuperseded: True when another version serves this version's
	// channel; its lastTransitionTime is when the version was superseded.
	ConditionSuperseded = "Superseded"
	// ConditionSkillsResolved: every spec.skills entry resolved to content.
	ConditionSkillsResolved = "SkillsResolved"
	// ConditionSkillsValid: no two skills from different sources share a name.
	ConditionSkillsValid = "SkillsValid"
	// ConditionSkillToolsResolved: every tool a skill allows is declared in
	// pack.json.
	ConditionSkillToolsResolved = "SkillToolsResolved"
	// ConditionContentDrifted: True when the ConfigMap's pack.json no longer
	// has status.contentDigest, the digest the version was validated with
	// (a published version's content is pinned); False while it has;
	// Unknown while pack.json cannot be read. Absent until a digest is
	// pinned, and for a live source.
	ConditionContentDrifted = "ContentDrifted"
)

// PromptPack condition reasons.
const (
	ReasonSourceValid            = "SourceValid"
	ReasonSourceValidationFailed = "SourceValidationFailed"
	// ReasonLiveSource: a live source is judged from its spec alone
	// (SourceValid True; SchemaValid Unknown).
	ReasonLiveSource             = "LiveSource"
	ReasonSchemaValid            = "SchemaValid"
	ReasonSchemaValidationFailed = "SchemaValidationFailed"
	ReasonSourceInvalid          = "SourceInvalid"
	ReasonAgentsNotified         = "AgentsNotified"
	ReasonNoAgentsToNotify       = "NoAgentsToNotify"
	ReasonIsChannelMax           = "IsChannelMax"
	ReasonNewerVersionPublished  = "NewerVersionPublished"
	// ReasonDuplicateVersion is set with Superseded=True on a version that
	// has the same precedence as a sibling created later (they differ only
	// in build metadata or in a leading "v"); the later one serves.
	ReasonDuplicateVersion          = "DuplicateVersion"
	ReasonNoSkills                  = "NoSkills"
	ReasonAllSkillsResolved         = "AllSkillsResolved"
	ReasonContentStorageUnavailable = "ContentStorageUnavailable"
	ReasonLookupFailed              = "LookupFailed"
	ReasonNoCollisions              = "NoCollisions"
	ReasonNameCollision             = "NameCollision"
	ReasonAllToolsResolved          = "AllToolsResolved"
	ReasonUnknownTool               = "UnknownTool"
	// ReasonDigestMismatch is set with ContentDrifted=True; the message
	// names the pinned digest and the one pack.json has now.
	ReasonDigestMismatch = "DigestMismatch"
	// ReasonDigestMatches is set with ContentDrifted=False.
	ReasonDigestMatches = "DigestMatches"
)

// Event reasons emitted by the PromptPack controller (all Warning). The
// event message carries the validator's own error.
const (
	EventSourceValidationFailed = "SourceValidationFailed"
	EventSchemaValidationFailed = "SchemaValidationFailed"
	EventDuplicateVersion       = "DuplicateVersion"
	// EventContentDrifted marks each change of a validated version's
	// pack.json away from its pinned digest.
	EventContentDrifted = "ContentDrifted"
)

// IsLive reports whether the PromptPack's content comes from a live source.
func (p *PromptPack) IsLive() bool { return p.Spec.Source.Type == SourceTypeLive }

// ParsedVersion parses spec.version.
func (p *PromptPack) ParsedVersion() (Version, error) { return ParseVersion(p.Spec.Version) }
