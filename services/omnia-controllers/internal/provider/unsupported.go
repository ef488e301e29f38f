package provider

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// unsupportedFields are the Provider spec fields the platform does not
// implement: the speech and embedding settings reach no runtime (the
// platform has no duplex sessions or memory that would use them, and the
// AgentRuntime passes them on in no form). The Unsupported condition names
// the ones a Provider sets; the Provider's phase does not change.
// Implementing a field means dropping its entry here and its row in
// docs/omnia-controllers.md ("Fields the platform does not implement").
var unsupportedFields = []kubeutil.UnsupportedField[omniav1.ProviderSpec]{
	{Path: "spec.tts", Set: func(s *omniav1.ProviderSpec) bool { return s.TTS != nil }},
	{Path: "spec.stt", Set: func(s *omniav1.ProviderSpec) bool { return s.STT != nil }},
	{Path: "spec.embedding", Set: func(s *omniav1.ProviderSpec) bool { return s.Embedding != nil }},
}

// UnsupportedFields lists, sorted, the paths of the fields spec sets that
// the platform does not implement.
func UnsupportedFields(spec *omniav1.ProviderSpec) []string {
	return kubeutil.UnsupportedFields(unsupportedFields, spec)
}

// unsupported sets the Unsupported condition from the spec alone, with a
// Warning event when the list changes to a non-empty one.
func (d *decider) unsupported() {
	status, reason, msg := kubeutil.UnsupportedCondition(UnsupportedFields(&d.s.Provider.Spec))
	d.WarnOn(d.Set(omniav1.ConditionUnsupported, status, reason, msg) && status == metav1.ConditionTrue, omniav1.EventFieldsNotImplemented, msg)
}
