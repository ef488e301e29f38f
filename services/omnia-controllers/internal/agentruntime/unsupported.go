package agentruntime

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// unsupportedFields are the AgentRuntime spec fields the platform does not
// implement, each with what counts as asking for it (a switch left off, or
// a default left as it is, asks for nothing). The Unsupported condition
// names the ones an agent sets; the agent runs without them. Implementing
// a field means dropping its entry here and its row in
// docs/omnia-controllers.md ("Fields the platform does not implement").
// The facades' image, drainTimeout, a2a and mcp and the autoscaling type
// keda are judged where they are built (AutoscalingReady reports keda).
var unsupportedFields = []kubeutil.UnsupportedField[omniav1.AgentRuntimeSpec]{
	{Path: "spec.inputSchema", Set: func(s *omniav1.AgentRuntimeSpec) bool { return s.InputSchema != nil }},
	{Path: "spec.outputSchema", Set: func(s *omniav1.AgentRuntimeSpec) bool { return s.OutputSchema != nil }},
	{Path: "spec.outputFormat", Set: func(s *omniav1.AgentRuntimeSpec) bool { return s.OutputFormat != "" }},
	{Path: "spec.facades[].handler", Set: anyFacade(func(f *omniav1.FacadeConfig) bool {
		return f.Handler != nil && *f.Handler != omniav1.HandlerModeRuntime
	})},
	{Path: "spec.facades[].clientToolTimeout", Set: anyFacade(func(f *omniav1.FacadeConfig) bool { return f.ClientToolTimeout != nil })},
	{Path: "spec.facades[].extraEnv", Set: anyFacade(func(f *omniav1.FacadeConfig) bool { return len(f.ExtraEnv) > 0 })},
	{Path: "spec.facades[].managementPlane", Set: anyFacade(func(f *omniav1.FacadeConfig) bool { return f.ManagementPlane != nil })},
	{Path: "spec.facades[].expose", Set: anyFacade(func(f *omniav1.FacadeConfig) bool { return f.Expose != nil && f.Expose.Enabled })},
	{Path: "spec.media", Set: func(s *omniav1.AgentRuntimeSpec) bool { return s.Media != nil }},
	{Path: "spec.evals", Set: func(s *omniav1.AgentRuntimeSpec) bool { return s.Evals != nil && s.Evals.Enabled }},
	{Path: "spec.console", Set: func(s *omniav1.AgentRuntimeSpec) bool { return s.Console != nil }},
	{Path: "spec.duplex", Set: func(s *omniav1.AgentRuntimeSpec) bool { return s.Duplex != nil && s.Duplex.Enabled }},
	{Path: "spec.memory", Set: func(s *omniav1.AgentRuntimeSpec) bool { return s.Memory != nil && s.Memory.Enabled }},
	{Path: "spec.externalAuth.clientKeys", Set: func(s *omniav1.AgentRuntimeSpec) bool {
		return s.ExternalAuth != nil && s.ExternalAuth.ClientKeys != nil
	}},
	{Path: "spec.externalAuth.edgeTrust", Set: func(s *omniav1.AgentRuntimeSpec) bool {
		return s.ExternalAuth != nil && s.ExternalAuth.EdgeTrust != nil
	}},
	{Path: "spec.privacyPolicyRef", Set: func(s *omniav1.AgentRuntimeSpec) bool { return s.PrivacyPolicyRef != nil }},
}

// anyFacade is a Set check that holds when one of the facades asks for
// what set checks.
func anyFacade(set func(*omniav1.FacadeConfig) bool) func(*omniav1.AgentRuntimeSpec) bool {
	return func(s *omniav1.AgentRuntimeSpec) bool {
		for i := range s.Facades {
			if set(&s.Facades[i]) {
				return true
			}
		}
		return false
	}
}

// UnsupportedFields lists, sorted, the paths of the fields spec sets that
// the platform does not implement.
func UnsupportedFields(spec *omniav1.AgentRuntimeSpec) []string {
	return kubeutil.UnsupportedFields(unsupportedFields, spec)
}

// unsupported sets the Unsupported condition from the spec alone. A
// Warning event marks each change to a non-empty list, not every pass that
// finds the same list; the condition leaves the phase alone.
func (d *decider) unsupported() {
	status, reason, msg := kubeutil.UnsupportedCondition(UnsupportedFields(&d.s.in.Agent.Spec))
	if d.set(omniav1.ConditionUnsupported, status, reason, msg) && status == metav1.ConditionTrue {
		d.warn("Validate", omniav1.EventFieldsNotImplemented, msg)
	}
}
