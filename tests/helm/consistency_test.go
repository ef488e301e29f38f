package helm

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"
)

// sharedMarker opens the block of helpers every service chart carries.
const sharedMarker = "{{/*\nShared helpers."

// TestServiceChartsShareTheirHelpers: the shared block of every service
// chart's _helpers.tpl is the same, but for the chart's own name as prefix.
func TestServiceChartsShareTheirHelpers(t *testing.T) {
	var want string
	for _, c := range serviceCharts {
		raw := string(readFile(t, filepath.Join("helm", c, "templates", "_helpers.tpl")))
		i := strings.Index(raw, sharedMarker)
		if i < 0 {
			t.Fatalf("%s/templates/_helpers.tpl has no shared block", c)
		}
		shared := strings.ReplaceAll(raw[i:], `"`+c+`.`, `"CHART.`)
		if want == "" {
			want = shared
			continue
		}
		if shared != want {
			t.Errorf("%s's shared helpers differ from %s's", c, serviceCharts[0])
		}
	}
}

// TestChartVersions: every chart is version 0.1.0 with appVersion equal to
// the repository's VERSION, and the umbrella depends on exactly the service
// charts, from this repository, at their versions.
func TestChartVersions(t *testing.T) {
	version := "0.1.0"
	if raw, err := os.ReadFile(filepath.Join(repoRoot(t), "VERSION")); err == nil {
		version = strings.TrimPrefix(strings.TrimSpace(string(raw)), "v")
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	versions := map[string]string{}
	for _, c := range allCharts {
		// The chart as in the working tree, not built.
		ch, err := loader.LoadDir(filepath.Join(repoRoot(t), "helm", c))
		if err != nil {
			t.Fatalf("load %s: %v", c, err)
		}
		md := ch.Metadata
		if md.Name != c || md.AppVersion != version || md.Version != version {
			t.Errorf("%s: name %q version %q appVersion %q, want %q %q %q", c, md.Name, md.Version, md.AppVersion, c, version, version)
		}
		versions[c] = md.Version
	}
	ch, err := loader.LoadDir(filepath.Join(repoRoot(t), "helm", umbrella))
	if err != nil {
		t.Fatal(err)
	}
	var deps []string
	for _, d := range ch.Metadata.Dependencies {
		deps = append(deps, d.Name)
		if d.Repository != "file://../"+d.Name || d.Version != versions[d.Name] {
			t.Errorf("dependency %s: repository %q version %q", d.Name, d.Repository, d.Version)
		}
	}
	if !reflect.DeepEqual(deps, serviceCharts) {
		t.Errorf("the umbrella depends on %v, want %v", deps, serviceCharts)
	}
}

// TestChartCRDsAreTheGeneratedCRDs: helm/agentplane/files/crds holds
// exactly the files of deploy/crds, byte for byte (`make helm-crds`, part
// of `make generate`, copies them).
func TestChartCRDsAreTheGeneratedCRDs(t *testing.T) {
	root := repoRoot(t)
	gen, err := filepath.Glob(filepath.Join(root, "deploy", "crds", "*.yaml"))
	if err != nil || len(gen) == 0 {
		t.Fatalf("no generated CRDs: %v", err)
	}
	chartDir := filepath.Join(root, "helm", umbrella, "files", "crds")
	inChart, err := walkFiles(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, f := range gen {
		want[filepath.Base(f)] = true
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join(chartDir, filepath.Base(f)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("helm/agentplane/files/crds/%s differs from deploy/crds (run make helm-crds)", filepath.Base(f))
		}
	}
	for _, f := range inChart {
		if !want[f] {
			t.Errorf("helm/agentplane/files/crds/%s is not in deploy/crds (run make helm-crds)", f)
		}
	}
}

// exactJSON turns YAML into a value whose numbers are kept as written.
func exactJSON(t *testing.T, doc string) map[string]any {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestUmbrellaInstallsTheGeneratedCRDsUnchanged: the umbrella renders one
// CRD per file of deploy/crds, equal to it but for the labels and the keep
// annotation the chart adds.
func TestUmbrellaInstallsTheGeneratedCRDsUnchanged(t *testing.T) {
	r := mustRender(t, umbrella, "")
	gen, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "crds", "*.yaml"))
	if err != nil || len(gen) == 0 {
		t.Fatalf("no generated CRDs: %v", err)
	}
	if got := len(r.ofKind("CustomResourceDefinition")); got != len(gen) {
		t.Errorf("%d CRDs rendered, %d generated", got, len(gen))
	}
	for _, f := range gen {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want := exactJSON(t, string(raw))
		name := want["metadata"].(map[string]any)["name"].(string)
		doc, ok := r.docs[key("CustomResourceDefinition", "", name)]
		if !ok {
			t.Errorf("CRD %s (%s) is not rendered", name, filepath.Base(f))
			continue
		}
		got := exactJSON(t, doc)
		meta := got["metadata"].(map[string]any)
		delete(meta, "labels")
		ann := meta["annotations"].(map[string]any)
		if ann["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s is not kept on uninstall", name)
		}
		delete(ann, "helm.sh/resource-policy")
		if !reflect.DeepEqual(got, want) {
			t.Errorf("CRD %s as rendered differs from %s", name, filepath.Base(f))
		}
	}
}

// binaryFlags reads the flag table docs/<service>.md carries between the
// servicetest markers; each service's own tests keep it equal to the
// binary's flag definitions, so it stands for the binary here.
func binaryFlags(t *testing.T, service string) map[string]bool {
	t.Helper()
	const begin, end = "<!-- flags:begin", "<!-- flags:end -->"
	doc := string(readFile(t, filepath.Join("docs", service+".md")))
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/%s.md has no generated flag table", service)
	}
	flags := map[string]bool{}
	for _, line := range strings.Split(doc[i:j], "\n") {
		cells := strings.Split(line, "|")
		if len(cells) > 2 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`--") {
			flags[strings.Trim(strings.TrimSpace(cells[1]), "`-")] = true
		}
	}
	if len(flags) == 0 {
		t.Fatalf("the flag table of docs/%s.md is empty (make generate fills it)", service)
	}
	return flags
}

// TestChartsPassOnlyFlagsTheBinariesHave: with every value set, each
// argument a chart renders is a flag of its binary, so a renamed flag
// cannot leave a chart passing one the binary refuses at start.
func TestChartsPassOnlyFlagsTheBinariesHave(t *testing.T) {
	everything := map[string]string{
		"agent-controller": `
logLevel: debug
kubeApiQps: 10
kubeApiBurst: 20
shutdownTimeout: 5s
leaderElection: {namespace: leases, leaseDuration: 30s, renewDeadline: 20s, retryPeriod: 4s}
watchNamespace: team-a
maxOutputBytes: 1000
pollInterval: 30s
workers: 2
natsUrl: nats://nats:4222
nats: {credentialsSecret: c, caSecret: ca, accountSigningKeySecret: k}
supervisor: {path: /supervisor}
batch: {enabled: true, pollSeconds: 30}
realtime: {enabled: true, keyNamespace: keys}
runNetworkPolicy: {enabled: true, gatewayNamespace: gw, gatewayPodLabels: {app: gw}}
`,
		"batch-poller": `
logLevel: debug
kubeApiQps: 10
kubeApiBurst: 20
shutdownTimeout: 5s
batchPollSeconds: 30
batchPollConcurrency: 4
natsUrl: nats://nats:4222
nats: {credentialsSecret: c, caSecret: ca}
anthropicBaseUrl: https://a.example
openaiBaseUrl: https://o.example/v1
geminiBaseUrl: https://g.example
`,
		"realtime-gateway": `
logLevel: debug
kubeApiQps: 10
kubeApiBurst: 20
shutdownTimeout: 5s
tls: {secretName: tls}
keySecretNamespace: keys
dialTimeout: 1s
idleConnTimeout: 1m
authCacheTtl: 1s
deniedCacheTtl: 1s
`,
		"omnia-controllers": `
logLevel: debug
kubeApiQps: 10
kubeApiBurst: 20
shutdownTimeout: 5s
leaderElection: {namespace: leases, leaseDuration: 30s, renewDeadline: 20s, retryPeriod: 4s}
runtime: {image: 'r:1', command: [a, b], imagePullPolicy: Always}
providerCredentialProbe: false
prometheusUrl: http://prometheus:9090
`,
	}
	for _, c := range serviceCharts {
		t.Run(c, func(t *testing.T) {
			flags := binaryFlags(t, c)
			r := mustRender(t, c, everything[c])
			args := r.args(t, c)
			if len(args) < 10 {
				t.Fatalf("only %d args rendered with every value set: %q", len(args), args)
			}
			for _, a := range args {
				name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if !strings.HasPrefix(a, "--") || !flags[name] {
					t.Errorf("the chart passes %q, which is not a flag of %s (docs/%s.md)", a, c, c)
				}
			}
		})
	}
}
