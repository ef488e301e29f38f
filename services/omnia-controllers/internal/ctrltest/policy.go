package ctrltest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/libs/testenv"
)

// installPolicy installs an admission policy file of the install (its
// policy, "---", its binding; a field their types lack is refused) for
// namespace ns only: both are renamed after ns, and bind points the binding
// at the policy's new name and narrows it to ns, returning the policy name
// the file's binding named. Both are deleted when the test ends.
//
//nolint:contextcheck // test helper: it makes its own context.Background(), the only context the tests have
func installPolicy(tb testing.TB, env *testenv.Env, ns, file string, policy, binding client.Object,
	bind func(policyName string, match *admissionv1.MatchResources) (was string)) {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(env.RepoRoot, file))
	if err != nil {
		tb.Fatal(err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	if len(docs) != 2 {
		tb.Fatalf("%s: %d documents, want the policy and its binding", file, len(docs))
	}
	for i, o := range []client.Object{policy, binding} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), o); err != nil {
			tb.Fatalf("%s: document %d: %v", file, i+1, err)
		}
	}
	name := policy.GetName() + "-" + ns
	if was := bind(name, onlyNamespace(ns)); was != policy.GetName() {
		tb.Fatalf("%s: the binding names policy %q, the policy is %q", file, was, policy.GetName())
	}
	policy.SetName(name)
	binding.SetName(name)
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(context.Background(), o); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

// onlyNamespace matches the objects of namespace ns only, for a binding
// that must leave the other tests on the control plane alone.
func onlyNamespace(ns string) *admissionv1.MatchResources {
	return &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}
}
