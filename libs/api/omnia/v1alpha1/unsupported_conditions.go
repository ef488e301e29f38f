package v1alpha1

// ConditionUnsupported is set on AgentRuntimes and Providers: True names
// each spec field that is set but that this platform does not implement,
// so a field is never ignored silently. It does not change the phase: the
// object runs without the field. See docs/omnia-controllers.md, "Fields the
// platform does not implement".
const ConditionUnsupported = "Unsupported"

// Unsupported condition reasons.
const (
	// ReasonFieldsNotImplemented: the message lists the set fields the
	// platform ignores, by path, sorted.
	ReasonFieldsNotImplemented = "FieldsNotImplemented"
	// ReasonAllFieldsSupported: every field the spec sets is implemented.
	ReasonAllFieldsSupported = "AllFieldsSupported"
)

// EventFieldsNotImplemented is the Warning event emitted when the set of
// unimplemented fields an object sets changes to a non-empty one.
const EventFieldsNotImplemented = "FieldsNotImplemented"
