package helm

import (
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestPromptPackLabelPolicy: omnia-controllers' chart ships the same
// MutatingAdmissionPolicy as deploy/omnia-controllers (the one the
// controller's tests install), bound to itself, on Kubernetes 1.36 and
// later only, and not when promptPackLabelPolicy.enabled is false.
func TestPromptPackLabelPolicy(t *testing.T) {
	raw := string(readFile(t, "deploy/omnia-controllers/promptpack-label-policy.yaml"))
	docs := strings.Split(raw, "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("deploy/omnia-controllers/promptpack-label-policy.yaml: %d documents, want 2", len(docs))
	}
	want := map[string]any{}
	if err := yaml.Unmarshal([]byte(docs[0]), &want); err != nil {
		t.Fatal(err)
	}
	policies := func(r *rendered) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, o := range r.objects {
			if strings.HasPrefix(o.GetKind(), "MutatingAdmissionPolicy") {
				out = append(out, o)
			}
		}
		return out
	}

	t.Run("the chart's policy is the deploy one, bound to itself", func(t *testing.T) {
		r := mustRender(t, "omnia-controllers", "")
		name := releaseNS + "-omnia-controllers-promptpack-label"
		p := r.get(t, "MutatingAdmissionPolicy", "", name)
		if !reflect.DeepEqual(p.Object["spec"], want["spec"]) {
			t.Errorf("the chart's policy spec differs from deploy's:\nchart  %v\ndeploy %v", p.Object["spec"], want["spec"])
		}
		b := r.get(t, "MutatingAdmissionPolicyBinding", "", name)
		if got, _, _ := unstructured.NestedString(b.Object, "spec", "policyName"); got != name {
			t.Errorf("the binding names policy %q, want %q", got, name)
		}
	})
	t.Run("switched off, nothing is rendered", func(t *testing.T) {
		if ps := policies(mustRender(t, "omnia-controllers", "promptPackLabelPolicy: {enabled: false}")); len(ps) != 0 {
			t.Errorf("rendered %d admission policy objects", len(ps))
		}
	})
	t.Run("before Kubernetes 1.36 nothing is rendered", func(t *testing.T) {
		saved := kubeVersion
		kubeVersion = &chartutil.KubeVersion{Version: "v1.35.4", Major: "1", Minor: "35"}
		defer func() { kubeVersion = saved }()
		if ps := policies(mustRender(t, "omnia-controllers", "")); len(ps) != 0 {
			t.Errorf("rendered %d admission policy objects for Kubernetes 1.35", len(ps))
		}
	})
}
