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

	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
	"github.com/agentplane/agentplane/libs/testenv/rbacaudit"
)

// kustomize renders a kustomization with the kubectl built alongside the
// control plane.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	assets, err := kubeassets.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(assets, kubeassets.BinKubectl), "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	objs, err := rbacaudit.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// grants expands RBAC objects into what each ServiceAccount may do, one
// line per single permission, keyed by "ns/sa". Role and binding names do
// not count, so two installs granting the same things compare equal.
func grants(t *testing.T, objs []*unstructured.Unstructured) map[string]sets.Set[string] {
	t.Helper()
	all, err := rbacaudit.Grants(objs)
	if err != nil {
		t.Error(err)
	}
	out := map[string]sets.Set[string]{}
	for _, g := range all {
		if out[g.ServiceAccount] == nil {
			out[g.ServiceAccount] = sets.New[string]()
		}
		out[g.ServiceAccount].Insert(g.String())
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
		{"NATS run credentials grant what the nats-auth component adds", []string{"batch", "nats-auth"},
			"global: {batch: {enabled: true}}" + natsInitValues},
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
