package helm

import (
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestAdmissionPolicies: omnia-controllers' chart ships each admission
// policy of deploy/omnia-controllers (the ones the controller's tests
// install) with the same spec, bound to itself, on the Kubernetes versions
// that serve its kind only, and not when its value switches it off.
func TestAdmissionPolicies(t *testing.T) {
	for _, c := range []struct {
		name, file, kind, suffix, off string
		// before is a Kubernetes version without the kind.
		before chartutil.KubeVersion
	}{
		{"the PromptPack label policy (MutatingAdmissionPolicy, 1.36)", "deploy/omnia-controllers/promptpack-label-policy.yaml",
			"MutatingAdmissionPolicy", "promptpack-label", "promptPackLabelPolicy: {enabled: false}",
			chartutil.KubeVersion{Version: "v1.35.4", Major: "1", Minor: "35"}},
		{"the facade report policy (ValidatingAdmissionPolicy, 1.30)", "deploy/omnia-controllers/facade-report-policy.yaml",
			"ValidatingAdmissionPolicy", "facade-reports", "facadeReportPolicy: {enabled: false}",
			chartutil.KubeVersion{Version: "v1.29.9", Major: "1", Minor: "29"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, wantBinding := deployPolicy(t, c.file)
			t.Run("the chart's policy is the deploy one, bound to itself", func(t *testing.T) {
				r := mustRender(t, "omnia-controllers", "")
				name := releaseNS + "-omnia-controllers-" + c.suffix
				p := r.get(t, c.kind, "", name)
				if !reflect.DeepEqual(p.Object["spec"], want["spec"]) {
					t.Errorf("the chart's policy spec differs from deploy's:\nchart  %v\ndeploy %v", p.Object["spec"], want["spec"])
				}
				b := r.get(t, c.kind+"Binding", "", name)
				if got, _, _ := unstructured.NestedString(b.Object, "spec", "policyName"); got != name {
					t.Errorf("the binding names policy %q, want %q", got, name)
				}
				// The binding's spec is deploy's but for the policy's name.
				spec, _, _ := unstructured.NestedMap(wantBinding, "spec")
				spec["policyName"] = name
				if got, _, _ := unstructured.NestedMap(b.Object, "spec"); !reflect.DeepEqual(got, spec) {
					t.Errorf("the chart's binding spec %v, want deploy's %v", got, spec)
				}
			})
			t.Run("switched off, nothing is rendered", func(t *testing.T) {
				if ps := mustRender(t, "omnia-controllers", c.off).kindsPrefixed(c.kind); len(ps) != 0 {
					t.Errorf("rendered %d %s objects", len(ps), c.kind)
				}
			})
			t.Run("on a Kubernetes without the kind nothing is rendered", func(t *testing.T) {
				saved := kubeVersion
				kubeVersion = &c.before
				defer func() { kubeVersion = saved }()
				if ps := mustRender(t, "omnia-controllers", "").kindsPrefixed(c.kind); len(ps) != 0 {
					t.Errorf("rendered %d %s objects for Kubernetes %s", len(ps), c.kind, c.before.Version)
				}
			})
		})
	}
}

// deployPolicy reads an admission policy file of deploy/ (its policy,
// "---", its binding).
func deployPolicy(t *testing.T, file string) (policy, binding map[string]any) {
	t.Helper()
	docs := strings.Split(string(readFile(t, file)), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%s: %d documents, want 2", file, len(docs))
	}
	policy, binding = map[string]any{}, map[string]any{}
	for i, m := range []map[string]any{policy, binding} {
		if err := yaml.Unmarshal([]byte(docs[i]), &m); err != nil {
			t.Fatalf("%s: document %d: %v", file, i+1, err)
		}
	}
	return policy, binding
}

// kindsPrefixed are the rendered objects whose kind starts with prefix.
func (r *rendered) kindsPrefixed(prefix string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objects {
		if strings.HasPrefix(o.GetKind(), prefix) {
			out = append(out, o)
		}
	}
	return out
}
