package helm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/libs/testenv"
)

// kustomize renders a kustomization with the kubectl built alongside the
// control plane.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(assets, testenv.BinKubectl), "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(out), "\n---\n") {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "{}" {
			continue
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(js); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	return objs
}

// grants expands RBAC objects into what each ServiceAccount may do, one
// string per ServiceAccount, scope, API group, resource, resource name and
// verb: "ns/sa | cluster | apps | deployments | * | get". A RoleBinding's
// grants are scoped to its namespace. Role and binding names do not count.
func grants(t *testing.T, objs []*unstructured.Unstructured) map[string]sets.Set[string] {
	t.Helper()
	roles := map[string]*unstructured.Unstructured{} // "Kind ns/name"
	for _, o := range objs {
		if o.GetKind() == "Role" || o.GetKind() == "ClusterRole" {
			roles[key(o.GetKind(), o.GetNamespace(), o.GetName())] = o
		}
	}
	out := map[string]sets.Set[string]{}
	for _, b := range objs {
		if b.GetKind() != "RoleBinding" && b.GetKind() != "ClusterRoleBinding" {
			continue
		}
		refKind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
		refName, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		roleNS, scope := "", "cluster"
		if b.GetKind() == "RoleBinding" {
			scope = "namespace " + b.GetNamespace()
			if refKind == "Role" {
				roleNS = b.GetNamespace()
			}
		}
		role, ok := roles[key(refKind, roleNS, refName)]
		if !ok {
			t.Errorf("%s %s/%s binds %s %s, which is not rendered", b.GetKind(), b.GetNamespace(), b.GetName(), refKind, refName)
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		for _, s := range subjects {
			sub := s.(map[string]any)
			if sub["kind"] != "ServiceAccount" {
				t.Errorf("%s %s binds a %v; only ServiceAccounts are expected", b.GetKind(), b.GetName(), sub["kind"])
				continue
			}
			ns, _ := sub["namespace"].(string)
			if ns == "" {
				ns = b.GetNamespace() // the RBAC authorizer's default for a RoleBinding
			}
			sa := ns + "/" + sub["name"].(string)
			if out[sa] == nil {
				out[sa] = sets.New[string]()
			}
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				names := strs(rule["resourceNames"])
				if len(names) == 0 {
					names = []string{"*"}
				}
				for _, g := range strs(rule["apiGroups"]) {
					for _, res := range strs(rule["resources"]) {
						for _, n := range names {
							for _, v := range strs(rule["verbs"]) {
								out[sa].Insert(strings.Join([]string{sa, scope, g, res, n, v}, " | "))
							}
						}
					}
				}
				for _, u := range strs(rule["nonResourceURLs"]) {
					for _, v := range strs(rule["verbs"]) {
						out[sa].Insert(strings.Join([]string{sa, scope, "url " + u, v}, " | "))
					}
				}
			}
		}
	}
	return out
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, x.(string))
	}
	return out
}

func serviceAccounts(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		if o.GetKind() == "ServiceAccount" {
			out = append(out, o.GetNamespace()+"/"+o.GetName())
		}
	}
	sort.Strings(out)
	return out
}

// TestUmbrellaGrantsWhatKustomizeGrants: for each choice of components,
// the umbrella chart creates the same ServiceAccounts as the kustomize
// install and grants each exactly the same permissions (the rules
// services' rbac tests check as those ServiceAccounts).
func TestUmbrellaGrantsWhatKustomizeGrants(t *testing.T) {
	deploy := filepath.Join(repoRoot(t), "deploy")
	cases := []struct {
		rule       string
		components []string
		values     string
	}{
		{"the defaults grant what the kustomize base grants", nil, ""},
		{"batch grants what the batch component adds", []string{"batch"}, "global: {batch: {enabled: true}}"},
		{"realtime grants what the realtime component adds", []string{"realtime"}, "global: {realtime: {enabled: true}}"},
		{"omnia grants what the omnia component adds", []string{"omnia"}, "global: {omnia: {enabled: true}}"},
		{"everything on grants what the base with every component grants", []string{"batch", "realtime", "omnia"},
			"global: {batch: {enabled: true}, realtime: {enabled: true}, omnia: {enabled: true}}"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			// An overlay of the base with the components, outside the repository.
			overlay := t.TempDir()
			rel, err := filepath.Rel(overlay, deploy)
			if err != nil {
				t.Fatal(err)
			}
			k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel + "\n"
			if len(tc.components) > 0 {
				k += "components:\n"
				for _, c := range tc.components {
					k += "  - " + rel + "/components/" + c + "\n"
				}
			}
			if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
				t.Fatal(err)
			}
			kz := kustomize(t, overlay)
			r := mustRender(t, umbrella, tc.values)
			var hm []*unstructured.Unstructured
			for _, k := range r.keys() {
				hm = append(hm, r.objects[k])
			}

			if got, want := serviceAccounts(hm), serviceAccounts(kz); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("ServiceAccounts: chart %v, kustomize %v", got, want)
			}
			got, want := grants(t, hm), grants(t, kz)
			if len(want) == 0 {
				t.Fatal("kustomize grants nothing: the comparison would be empty")
			}
			for sa := range sets.KeySet(want).Union(sets.KeySet(got)) {
				g, w := got[sa], want[sa]
				if g == nil {
					g = sets.New[string]()
				}
				if w == nil {
					w = sets.New[string]()
				}
				for _, extra := range sets.List(g.Difference(w)) {
					t.Errorf("the chart grants more than kustomize: %s", extra)
				}
				for _, missing := range sets.List(w.Difference(g)) {
					t.Errorf("the chart does not grant: %s", missing)
				}
			}
		})
	}
}
