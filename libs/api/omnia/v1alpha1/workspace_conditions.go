package v1alpha1

// Workspace condition types, set on Workspace status.conditions.
const (
	// ConditionNamespaceReady: the namespace of spec.namespace.name exists
	// and carries this Workspace's LabelWorkspace label.
	ConditionNamespaceReady = "NamespaceReady"
)

// Workspace condition reasons (on NamespaceReady).
const (
	// ReasonNamespaceOwned: the namespace exists and is labelled for this
	// Workspace (the controller created or labelled it when needed).
	ReasonNamespaceOwned = "NamespaceOwned"
	// ReasonNamespaceClaimed: the namespace is labelled for another
	// Workspace that exists and names it; this one is refused.
	ReasonNamespaceClaimed = "NamespaceClaimed"
	// ReasonNamespaceTerminating: the namespace is being deleted; it is
	// created again once it is gone.
	ReasonNamespaceTerminating = "NamespaceTerminating"
)

// Event reasons emitted by the Workspace controller (Warning).
const (
	// EventNamespaceClaimed: the Workspace's namespace belongs to another
	// Workspace.
	EventNamespaceClaimed = "NamespaceClaimed"
)
