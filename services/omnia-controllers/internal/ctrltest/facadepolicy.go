package ctrltest

import (
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	"github.com/agentplane/agentplane/libs/testenv"
)

// FacadeReportPolicyFile is the ValidatingAdmissionPolicy the install
// ships to bind a facade's status write to its pod (the chart renders the
// same), relative to the repository root.
const FacadeReportPolicyFile = "deploy/omnia-controllers/facade-report-policy.yaml"

// InstallFacadeReportPolicy installs the shipped facade report policy for
// namespace ns only (its binding narrowed to ns, both renamed after it),
// so other tests on the same control plane are not affected. The policy
// reaches admission through an informer a moment later: the caller waits
// for its first refusal.
func InstallFacadeReportPolicy(tb testing.TB, env *testenv.Env, ns string) *admissionv1.ValidatingAdmissionPolicy {
	tb.Helper()
	policy, binding := &admissionv1.ValidatingAdmissionPolicy{}, &admissionv1.ValidatingAdmissionPolicyBinding{}
	installPolicy(tb, env, ns, FacadeReportPolicyFile, policy, binding, func(name string, match *admissionv1.MatchResources) string {
		was := binding.Spec.PolicyName
		binding.Spec.PolicyName, binding.Spec.MatchResources = name, match
		return was
	})
	return policy
}
