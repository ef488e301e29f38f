// Package helm tests the Helm charts under helm/ through Helm's Go SDK:
// lint, rendering rules, the values schemas, the CRDs the umbrella chart
// installs, the RBAC it grants (against the kustomize install's) and a
// server-side dry run of everything it renders against a real
// kube-apiserver.
package helm

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
	"github.com/agentplane/agentplane/tests/internal/charts"
)

// The charts, by directory name under helm/.
const umbrella = "agentplane"

var serviceCharts = []string{"agent-controller", "batch-poller", "realtime-gateway", "omnia-controllers"}

var allCharts = append(append([]string(nil), serviceCharts...), umbrella)

// Where the tests install: the namespace the kustomize install uses, so
// that the two compare object for object.
const (
	releaseName = "agentplane"
	releaseNS   = "agentplane-system"
)

// kubeVersion is the version the charts render for, the control plane's.
var kubeVersion = &chartutil.KubeVersion{Version: kubeassets.KubeVersion, Major: "1", Minor: "36"}

// repoRoot is the repository root (the directory holding go.work).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var (
	builtOnce sync.Once
	builtDir  string
	builtErr  error
)

// builtCharts returns a copy of helm/ with the umbrella chart's
// dependencies built (see charts.Build).
func builtCharts(t testing.TB) string {
	t.Helper()
	builtOnce.Do(func() { builtDir, builtErr = charts.Build(repoRoot(t)) })
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return builtDir
}

// chartDir is the directory of a chart, built (see builtCharts).
func chartDir(t testing.TB, name string) string {
	return filepath.Join(builtCharts(t), name)
}

func loadChart(t testing.TB, name string) *chart.Chart {
	t.Helper()
	ch, err := charts.Load(builtCharts(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// rendered is what an install would create, by "Kind namespace/name" (the
// namespace empty for cluster-scoped objects), plus the NOTES.
type rendered struct {
	objects map[string]*unstructured.Unstructured
	// docs are the objects as rendered, YAML text.
	docs  map[string]string
	notes string
}

func key(kind, namespace, name string) string { return kind + " " + namespace + "/" + name }

// render installs the chart client-side (`helm install --dry-run`) with the
// given values, a YAML document as in `helm install -f`. The values schemas
// are applied, as at a real install.
func render(t testing.TB, name, values string) (*rendered, error) {
	t.Helper()
	return renderIn(t, name, releaseNS, values)
}

// renderIn is render into another namespace.
func renderIn(t testing.TB, name, namespace, values string) (*rendered, error) {
	t.Helper()
	vals := readValues(t, values)
	in := action.NewInstall(&action.Configuration{})
	in.ClientOnly, in.DryRun, in.DryRunOption = true, true, "client"
	in.ReleaseName, in.Namespace = releaseName, namespace
	in.KubeVersion = kubeVersion
	in.DisableHooks = true
	rel, err := in.Run(loadChart(t, name), vals)
	if err != nil {
		return nil, err
	}
	r := &rendered{objects: map[string]*unstructured.Unstructured{}, docs: map[string]string{}, notes: rel.Info.Notes}
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("chart %s rendered a document that is not YAML: %v\n%s", name, err, doc)
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "{}" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			t.Fatalf("chart %s rendered a document that is not an object: %v\n%s", name, err, doc)
		}
		k := key(obj.GetKind(), obj.GetNamespace(), obj.GetName())
		if _, dup := r.objects[k]; dup {
			t.Fatalf("chart %s renders %s twice", name, k)
		}
		r.objects[k] = obj
		r.docs[k] = doc
	}
	return r, nil
}

// mustRender is render for values that must be accepted.
func mustRender(t testing.TB, name, values string) *rendered {
	t.Helper()
	r, err := render(t, name, values)
	if err != nil {
		t.Fatalf("render %s: %v", name, err)
	}
	return r
}

// get returns an object, failing the test when it was not rendered.
func (r *rendered) get(t testing.TB, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	o, ok := r.objects[key(kind, namespace, name)]
	if !ok {
		t.Fatalf("%s was not rendered; rendered: %s", key(kind, namespace, name), strings.Join(r.keys(), ", "))
	}
	return o
}

func (r *rendered) has(kind, namespace, name string) bool {
	_, ok := r.objects[key(kind, namespace, name)]
	return ok
}

func (r *rendered) keys() []string {
	var ks []string
	for k := range r.objects {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ofKind returns the rendered objects of one kind.
func (r *rendered) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, k := range r.keys() {
		if o := r.objects[k]; o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// container returns the first container of a Deployment's pod template.
func (r *rendered) container(t testing.TB, deployment string) map[string]any {
	t.Helper()
	d := r.get(t, "Deployment", releaseNS, deployment)
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		t.Fatalf("Deployment %s has no container", deployment)
	}
	return cs[0].(map[string]any)
}

// args returns a Deployment's container arguments.
func (r *rendered) args(t testing.TB, deployment string) []string {
	t.Helper()
	raw, _, _ := unstructured.NestedStringSlice(r.container(t, deployment), "args")
	return raw
}

// readFile reads a file under the repository root.
func readFile(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// walkFiles lists the regular files under dir, relative to it.
func walkFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return out, err
}

// readValues parses a YAML document of values, as `helm install -f` does.
func readValues(t testing.TB, values string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatalf("test values are not YAML: %v", err)
	}
	return v.AsMap()
}
