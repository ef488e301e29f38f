package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/kubeassets"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, testenv.Options{})) }

// strict makes the apiserver refuse unknown fields instead of pruning them,
// so a typo in an example fails the test rather than vanishing. It is set
// on the option itself: the client overwrites Raw's FieldValidation.
var strict = &client.CreateOptions{FieldValidation: metav1.FieldValidationStrict}

// wantKinds is every kind the two API groups must serve.
var wantKinds = map[string][]string{
	"agents.re-cinq.com":   {"Agent", "AgentDefinition", "Station"},
	"omnia.altairalabs.ai": {"AgentRuntime", "Connection", "MemoryPolicy", "PromptPack", "Provider", "RolloutAnalysis", "SandboxClass", "ScheduledFunction", "SessionRetentionPolicy", "SkillSource", "ToolPolicy", "ToolRegistry", "Workspace"},
}

func readCRDs(t *testing.T) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	dir := filepath.Join(env.RepoRoot, "deploy", "crds")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out = append(out, crd)
	}
	return out
}

func TestEveryCRDIsEstablished(t *testing.T) {
	ctx := context.Background()
	got := map[string][]string{}
	for _, crd := range readCRDs(t) {
		var live apiextensionsv1.CustomResourceDefinition
		if err := env.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, &live); err != nil {
			t.Fatalf("CRD %s not installed: %v", crd.Name, err)
		}
		established := false
		for _, c := range live.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		if !established {
			t.Errorf("CRD %s is not Established: %+v", crd.Name, live.Status.Conditions)
		}
		got[crd.Spec.Group] = append(got[crd.Spec.Group], crd.Spec.Names.Kind)
	}
	for group, kinds := range wantKinds {
		have := got[group]
		sort.Strings(have)
		if strings.Join(have, ",") != strings.Join(kinds, ",") {
			t.Errorf("group %s serves %v, want %v", group, have, kinds)
		}
	}
}

// embeddedKubernetesTypes are the schema fields, by CRD, that hold a whole
// Kubernetes type: the field is described, the fields below it are not
// (make generate-api drops their upstream descriptions to keep the CRD
// under kubectl apply's annotation limit) and Kubernetes documents them.
var embeddedKubernetesTypes = map[string]map[string]bool{
	"stations.agents.re-cinq.com": {".spec.template": true},
}

// TestEverySchemaFieldIsDescribed walks each CRD's schema: kubectl explain
// shows the description, so a field without one is a field nobody can
// look up.
func TestEverySchemaFieldIsDescribed(t *testing.T) {
	for _, crd := range readCRDs(t) {
		for _, v := range crd.Spec.Versions {
			var missing []string
			walkSchema(v.Schema.OpenAPIV3Schema, "", embeddedKubernetesTypes[crd.Name], &missing)
			if len(missing) > 0 {
				t.Errorf("%s %s: fields without a description: %s", crd.Name, v.Name, strings.Join(missing, ", "))
			}
		}
	}
}

func walkSchema(s *apiextensionsv1.JSONSchemaProps, path string, embedded map[string]bool, missing *[]string) {
	if s == nil {
		return
	}
	for name, p := range s.Properties {
		child := path + "." + name
		// apiVersion, kind and metadata are described by Kubernetes itself.
		if path == "" && (name == "apiVersion" || name == "kind" || name == "metadata") {
			continue
		}
		if strings.TrimSpace(p.Description) == "" {
			*missing = append(*missing, child)
		}
		if !embedded[child] {
			walkSchema(&p, child, embedded, missing)
		}
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkSchema(s.Items.Schema, path+"[]", embedded, missing)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkSchema(s.AdditionalProperties.Schema, path+"{}", embedded, missing)
	}
}

// maxLastApplied is what kubectl apply (client-side) can store: the
// object's JSON goes into the last-applied-configuration annotation, and
// an object's annotations may hold 256 KiB in total.
const maxLastApplied = 256 << 10

// TestEveryCRDFitsClientSideApply keeps each CRD installable with a plain
// kubectl apply: one that grows past the annotation limit (an embedded
// Kubernetes type with its descriptions, say) only applies server-side.
func TestEveryCRDFitsClientSideApply(t *testing.T) {
	for _, crd := range readCRDs(t) {
		raw, err := json.Marshal(crd)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) >= maxLastApplied {
			t.Errorf("%s is %d bytes as JSON; kubectl apply stores at most %d in its annotation", crd.Name, len(raw), maxLastApplied)
		}
	}
}

// docs splits a multi-document YAML file into objects, skipping empty ones.
func docs(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out
}

func yamlFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// TestEveryExampleApplies creates every object of every manifest in
// examples/ with strict field validation, in a fresh namespace per file.
func TestEveryExampleApplies(t *testing.T) {
	files := yamlFiles(t, filepath.Join(env.RepoRoot, "examples"))
	if len(files) == 0 {
		t.Fatal("no manifests under examples/")
	}
	seen := map[string]int{}
	for _, f := range files {
		rel, _ := filepath.Rel(env.RepoRoot, f)
		t.Run(rel, func(t *testing.T) {
			ns := env.Namespace(t)
			for _, obj := range docs(t, f) {
				if obj.GetNamespace() != "" {
					t.Errorf("%s %s sets a namespace; examples must apply into any namespace", obj.GetKind(), obj.GetName())
				}
				obj.SetNamespace(ns)
				if err := env.Client.Create(context.Background(), obj, strict); err != nil {
					t.Errorf("%s %s refused: %v", obj.GetKind(), obj.GetName(), err)
				}
				seen[obj.GetKind()]++
			}
		})
	}
	for _, kinds := range wantKinds {
		for _, k := range kinds {
			if seen[k] == 0 {
				t.Errorf("no example manifest holds a %s", k)
			}
		}
	}
}

// invalidCase is a manifest under testdata/invalid that admission must
// refuse, with the substrings its error must contain.
type invalidCase struct {
	path string
	want []string
}

func invalidCases(t *testing.T) []invalidCase {
	t.Helper()
	var out []invalidCase
	for _, f := range yamlFiles(t, filepath.Join("testdata", "invalid")) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := invalidCase{path: f}
		for _, line := range strings.Split(string(raw), "\n") {
			if w, ok := strings.CutPrefix(strings.TrimSpace(line), "# want:"); ok {
				c.want = append(c.want, strings.TrimSpace(w))
			}
		}
		if len(c.want) == 0 {
			t.Fatalf("%s has no '# want:' line naming the field its error must mention", f)
		}
		out = append(out, c)
	}
	return out
}

// TestInvalidManifestsAreRefused applies each invalid manifest and checks
// the apiserver refuses it with an error naming the offending field.
func TestInvalidManifestsAreRefused(t *testing.T) {
	cases := invalidCases(t)
	if len(cases) < 12 {
		t.Fatalf("only %d invalid manifests; want at least 12", len(cases))
	}
	ns := env.Namespace(t)
	refused := 0
	for _, c := range cases {
		name := strings.TrimSuffix(filepath.ToSlash(strings.TrimPrefix(c.path, filepath.Join("testdata", "invalid")+string(filepath.Separator))), ".yaml")
		t.Run(name, func(t *testing.T) {
			objs := docs(t, c.path)
			if len(objs) != 1 {
				t.Fatalf("want exactly one object, got %d", len(objs))
			}
			obj := objs[0]
			obj.SetNamespace(ns)
			err := env.Client.Create(context.Background(), obj, strict)
			if err == nil {
				t.Fatalf("admission accepted %s %s; want it refused", obj.GetKind(), obj.GetName())
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("refused for the wrong reason (not a validation error): %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			if !t.Failed() {
				refused++
			}
		})
	}
	t.Logf("%d of %d invalid manifests refused at admission with the expected message", refused, len(cases))
}

// TestPrinterColumnsInServerSideTables asks the apiserver for Table output,
// as kubectl get does, and checks each CRD's printer columns appear with the
// object's values.
func TestPrinterColumnsInServerSideTables(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	for _, f := range yamlFiles(t, filepath.Join(env.RepoRoot, "examples")) {
		for _, obj := range docs(t, f) {
			obj.SetNamespace(ns)
			if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	httpClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range readCRDs(t) {
		v := crd.Spec.Versions[0]
		if len(v.AdditionalPrinterColumns) == 0 {
			continue
		}
		t.Run(crd.Spec.Names.Kind, func(t *testing.T) {
			scope := "/namespaces/" + ns
			if crd.Spec.Scope == apiextensionsv1.ClusterScoped {
				scope = ""
			}
			url := strings.TrimSuffix(env.Config.Host, "/") + "/apis/" + crd.Spec.Group + "/" + v.Name + scope + "/" + crd.Spec.Names.Plural
			body, code := getTable(ctx, t, httpClient, url)
			var table metav1.Table
			if err := json.Unmarshal(body, &table); err != nil {
				t.Fatalf("%s: HTTP %d: %v\n%s", url, code, err, body)
			}
			if table.Kind != "Table" {
				t.Fatalf("got kind %q, want Table: HTTP %d %s", table.Kind, code, body)
			}
			var got []string
			for _, c := range table.ColumnDefinitions {
				got = append(got, c.Name)
			}
			want := []string{"Name"}
			for _, c := range v.AdditionalPrinterColumns {
				want = append(want, c.Name)
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("columns %v, want %v", got, want)
			}
			if len(table.Rows) == 0 {
				t.Skipf("no example %s to show in a row", crd.Spec.Names.Kind)
			}
			for i, c := range v.AdditionalPrinterColumns {
				if c.JSONPath == ".metadata.creationTimestamp" {
					if s, _ := table.Rows[0].Cells[i+1].(string); s == "" {
						t.Errorf("column %s is empty", c.Name)
					}
				}
			}
		})
	}
}

// TestKubectlExplainDescribesFields runs the kubectl built with the control
// plane against it, as a platform engineer would.
func TestKubectlExplainDescribesFields(t *testing.T) {
	assets, err := kubeassets.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	user, err := env.KubeconfigFor("explain")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kc, user, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ field, want string }{
		{"agents.spec.stationRef", "Station"},
		{"stations.spec.deadlineMinutes", "30"},
		{"agentdefinitions.spec.execution", "batch"},
		{"promptpacks.spec.version", "version"},
		{"agentruntimes.spec.promptPackRef", "PromptPack"},
	} {
		t.Run(c.field, func(t *testing.T) {
			out, err := exec.Command(filepath.Join(assets, kubeassets.BinKubectl), "--kubeconfig", kc, "explain", c.field).CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl explain %s: %v\n%s", c.field, err, out)
			}
			if !strings.Contains(string(out), "DESCRIPTION") || !strings.Contains(string(out), c.want) {
				t.Errorf("kubectl explain %s does not explain it (want %q):\n%s", c.field, c.want, out)
			}
		})
	}
}

// getTable GETs url as a server-side Table. A CRD installed moments ago may
// answer 429 "storage is (re)initializing" while its store starts; that is
// retried, as kubectl does, for up to 30 seconds.
func getTable(ctx context.Context, t *testing.T, c *http.Client, url string) ([]byte, int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			return body, resp.StatusCode
		}
		time.Sleep(200 * time.Millisecond)
	}
}
