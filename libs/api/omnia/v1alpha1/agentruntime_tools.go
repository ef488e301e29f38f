package v1alpha1

// The tools an AgentRuntime's pods receive from its ToolRegistry
// (docs/omnia-controllers.md, "Tools reach the pod").
const (
	// ToolsJSONKey is the data key of the generated tools file in the
	// agent's tools ConfigMap, and its file name in the pod.
	ToolsJSONKey = "tools.json"

	// ConditionToolSecretsReady: every Secret the registry's handlers
	// authenticate with may be used by the agent (visible to the
	// controllers, labelled LabelType=LabelTypeCredentials) and holds the
	// keys the handler reads, so it is mounted. False names each Secret
	// that is not, whose handler is left out of the agent's tools. Absent
	// without a usable ToolRegistry.
	ConditionToolSecretsReady = "ToolSecretsReady"

	// ReasonToolSecretsMounted: every referenced Secret is mounted (or
	// none is referenced).
	ReasonToolSecretsMounted = "ToolSecretsMounted"
	// ReasonToolSecretNotUsable: a referenced Secret does not exist, is not
	// labelled for use, or lacks a key its handler reads.
	ReasonToolSecretNotUsable = "ToolSecretNotUsable"

	// EventToolSecretNotUsable is emitted when ToolSecretsReady turns
	// False.
	EventToolSecretNotUsable = "ToolSecretNotUsable"
)
