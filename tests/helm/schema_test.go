package helm

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func readSchema(t *testing.T, chart string) map[string]any {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal(readFile(t, filepath.Join("helm", chart, "values.schema.json")), &s); err != nil {
		t.Fatalf("%s/values.schema.json: %v", chart, err)
	}
	return s
}

func readChartValues(t *testing.T, chart string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal(readFile(t, filepath.Join("helm", chart, "values.yaml")), &v); err != nil {
		t.Fatalf("%s/values.yaml: %v", chart, err)
	}
	return v
}

// TestSchemasCloseEveryObject: every object in every values schema says
// what it admits: additionalProperties is false, or a schema for the values
// of a map (labels, annotations, resource lists). The umbrella's keys for
// the service charts are the exception; Helm checks them with each
// service chart's own schema.
func TestSchemasCloseEveryObject(t *testing.T) {
	for _, c := range allCharts {
		t.Run(c, func(t *testing.T) {
			s := readSchema(t, c)
			if s["additionalProperties"] != false {
				t.Error("the top level admits unknown keys")
			}
			var walk func(path string, node any)
			walk = func(path string, node any) {
				switch n := node.(type) {
				case []any:
					for i, e := range n {
						walk(fmt.Sprintf("%s[%d]", path, i), e)
					}
				case map[string]any:
					_, hasProps := n["properties"]
					isObject := n["type"] == "object" || hasProps
					if isObject {
						switch ap := n["additionalProperties"].(type) {
						case bool:
							if ap {
								t.Errorf("%s admits any key", path)
							}
						case map[string]any:
							if hasProps {
								t.Errorf("%s has properties and admits other keys", path)
							}
						default:
							if c == umbrella && slices.Contains(serviceCharts, strings.TrimPrefix(path, "/properties/")) {
								break
							}
							t.Errorf("%s does not set additionalProperties", path)
						}
					}
					keys := make([]string, 0, len(n))
					for k := range n {
						keys = append(keys, k)
					}
					sort.Strings(keys)
					for _, k := range keys {
						walk(path+"/"+k, n[k])
					}
				}
			}
			walk("", s)
		})
	}
}

// TestSchemaRefusals: a wrong type or an unknown key is refused at install,
// with a message naming it.
func TestSchemaRefusals(t *testing.T) {
	type refusal struct {
		rule, chart, values, want string
	}
	var cases []refusal
	for _, c := range allCharts {
		cases = append(cases,
			refusal{c + ": an unknown key is refused by the schema", c, "replicas: 3", "'replicas'"},
			refusal{c + ": a misspelled global is refused by the schema", c, "global: {batch: {enable: true}}", "'enable'"},
		)
	}
	for _, c := range serviceCharts {
		cases = append(cases,
			refusal{c + ": an unknown nested key is refused by the schema", c, "image: {repository: x, version: v1}", "'version'"},
			refusal{c + ": a wrong type is refused by the schema", c, "replicaCount: two", "/replicaCount"},
			refusal{c + ": a string for a list is refused by the schema", c, "extraArgs: --verbose", "/extraArgs"},
			refusal{c + ": an unknown log level is refused by the schema", c, "logLevel: verbose", "/logLevel"},
			refusal{c + ": a malformed duration is refused by the schema", c, "shutdownTimeout: 15 seconds", "/shutdownTimeout"},
			refusal{c + ": a port out of range is refused by the schema", c, "ports: {metrics: 70000}", "/ports/metrics"},
			refusal{c + ": a pull policy Kubernetes does not know is refused by the schema", c, "image: {pullPolicy: Sometimes}", "/image/pullPolicy"},
			refusal{c + ": an env var without a name is refused by the schema", c, "extraEnv: [{value: x}]", "'name'"},
			refusal{c + ": an unknown key in a toleration is refused by the schema", c, "tolerations: [{key: a, op: Exists}]", "'op'"},
			refusal{c + ": a node selector term outside nodeAffinity is refused by the schema", c, "affinity: {nodeSelectorTerms: []}", "'nodeSelectorTerms'"},
			refusal{c + ": a non-string annotation is refused by the schema", c, "podAnnotations: {a: 1}", "/podAnnotations/a"},
			refusal{c + ": a malformed scrape interval is refused by the schema", c, "serviceMonitor: {enabled: true, interval: thirty}", "/serviceMonitor/interval"},
			refusal{c + ": an unknown key in a NetworkPolicy peer is refused by the schema", c, "networkPolicy: {metricsFrom: [{selector: {}}]}", "'selector'"},
			refusal{c + ": a negative replica count is refused by the schema", c, "replicaCount: -1", "/replicaCount"},
		)
	}
	cases = append(cases,
		refusal{"agent-controller: workers must be a positive integer", "agent-controller", "workers: 0", "/workers"},
		refusal{"agent-controller: maxOutputBytes must be an integer", "agent-controller", "maxOutputBytes: 1.5", "/maxOutputBytes"},
		refusal{"agent-controller: a namespace must be a DNS label", "agent-controller", "watchNamespace: Team_A", "/watchNamespace"},
		refusal{"agent-controller: run pods are never privileged", "agent-controller", "podSecurityLevel: privileged", "/podSecurityLevel"},
		refusal{"agent-controller: the gateway namespace must be a DNS label", "agent-controller", "runNetworkPolicy: {gatewayNamespace: Edge_GW}", "/runNetworkPolicy/gatewayNamespace"},
		refusal{"agent-controller: a gateway pod label value must be a label value", "agent-controller", "runNetworkPolicy: {gatewayPodLabels: {app: 'not a value'}}", "/runNetworkPolicy/gatewayPodLabels/app"},
		refusal{"agent-controller: serviceAccount.create=false without a name is refused", "agent-controller", "serviceAccount: {create: false}", "serviceAccount.name is required"},
		refusal{"batch-poller: more than one replica without NATS is refused, naming what is missing", "batch-poller", "replicaCount: 2", "needs natsUrl"},
		refusal{"batch-poller: a state bucket name with a dot is refused by the schema", "batch-poller", "state: {bucket: a.b}", "/state/bucket"},
		refusal{"realtime-gateway: an unknown Service type is refused by the schema", "realtime-gateway", "service: {type: ExternalName}", "/service/type"},
		refusal{"realtime-gateway: cert-manager without an issuer is refused", "realtime-gateway", "tls: {certManager: {enabled: true}}", "tls.certManager.issuerRef.name is required"},
		refusal{"realtime-gateway: an audience with a comma is refused by the schema", "realtime-gateway", "tokenAudiences: ['a,b']", "/tokenAudiences/0"},
		refusal{"realtime-gateway: a certificate name that is not a DNS name is refused by the schema", "realtime-gateway",
			"tls: {certManager: {dnsNames: ['gw example']}}", "/tls/certManager/dnsNames/0"},
		refusal{"omnia-controllers: a runtime command argument with a comma is refused by the schema", "omnia-controllers", "runtime: {command: ['a,b']}", "/runtime/command/0"},
		refusal{"batch-poller: a base URL must be an http(s) URL", "batch-poller", "openaiBaseUrl: api.openai.com/v1", "/openaiBaseUrl"},
		refusal{"agent-controller: a NATS Secret name must be a Secret name", "agent-controller", "nats: {credentialsSecret: NATS_Creds}", "/nats/credentialsSecret"},
		refusal{"agent-controller: an unknown key under nats is refused by the schema", "agent-controller", "nats: {seedSecret: s}", "'seedSecret'"},
		refusal{"batch-poller: only the agent-controller takes the account's signing key", "batch-poller", "nats: {accountSigningKeySecret: k}", "'accountSigningKeySecret'"},
		refusal{"agentplane: global.nats.caSecret must be a Secret name", umbrella, "global: {nats: {caSecret: 'ca cert'}}", "/global/nats/caSecret"},
		refusal{"omnia-controllers: prometheusUrl must be an http(s) URL", "omnia-controllers", "prometheusUrl: prometheus:9090", "/prometheusUrl"},
		refusal{"agentplane: a wrong type in global is refused by the schema", umbrella, "global: {batch: {enabled: 'yes'}}", "/global/batch/enabled"},
		refusal{"agentplane: an unknown key under crds is refused by the schema", umbrella, "crds: {upgrade: true}", "'upgrade'"},
		refusal{"agentplane: an unknown key in a service chart's values is refused through the umbrella", umbrella, "agent-controller: {worker: 3}", "'worker'"},
		refusal{"agentplane: a wrong type in a service chart's values is refused through the umbrella", umbrella,
			"global: {batch: {enabled: true}}\nbatch-poller: {batchPollConcurrency: many}", "/batchPollConcurrency"},
	)
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := render(t, tc.chart, tc.values)
			if err == nil {
				t.Fatalf("values %q were accepted", tc.values)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("the refusal does not name %s: %v", tc.want, err)
			}
		})
	}
}

// TestValuesFilesListEverySetting: values.yaml carries every key the schema
// admits (so it documents them), down to where the schema describes a
// Kubernetes type; the other direction is checked by every install with
// the defaults, the schema refusing unknown keys.
func TestValuesFilesListEverySetting(t *testing.T) {
	for _, c := range allCharts {
		t.Run(c, func(t *testing.T) {
			s := readSchema(t, c)
			defs, _ := s["definitions"].(map[string]any)
			var walk func(path string, schema map[string]any, values map[string]any)
			walk = func(path string, schema map[string]any, values map[string]any) {
				if ref, ok := schema["$ref"].(string); ok {
					schema, _ = defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
				}
				props, _ := schema["properties"].(map[string]any)
				for k, p := range props {
					v, ok := values[k]
					if !ok {
						t.Errorf("values.yaml lacks %s%s", path, k)
						continue
					}
					if m, ok := v.(map[string]any); ok && len(m) > 0 {
						walk(path+k+".", p.(map[string]any), m)
					}
				}
			}
			walk("", s, readChartValues(t, c))
		})
	}
}

// leafPaths lists the dotted paths of a values file's settings: scalars,
// lists, empty maps, and the maps opaque says are documented whole.
func leafPaths(prefix string, v map[string]any, opaque func(path string) bool) []string {
	var out []string
	for k, x := range v {
		if m, ok := x.(map[string]any); ok && len(m) > 0 && !opaque(prefix+k) {
			out = append(out, leafPaths(prefix+k+".", m, opaque)...)
			continue
		}
		out = append(out, prefix+k)
	}
	sort.Strings(out)
	return out
}

// TestInstallDocsListEveryValue: docs/install.md has every setting of every
// chart in its values tables, under the chart's heading.
func TestInstallDocsListEveryValue(t *testing.T) {
	doc := string(readFile(t, "docs/install.md"))
	for _, c := range allCharts {
		t.Run(c, func(t *testing.T) {
			heading := "### " + c
			i := strings.Index(doc, heading+"\n")
			if i < 0 {
				t.Fatalf("docs/install.md has no %q section", heading)
			}
			section := doc[i+len(heading):]
			if j := strings.Index(section, "\n### "); j >= 0 {
				section = section[:j]
			}
			// resources is a Kubernetes type, documented as one row; the
			// service charts' global is the umbrella's, documented there.
			opaque := func(p string) bool { return p == "resources" || (c != umbrella && p == "global") }
			for _, p := range leafPaths("", readChartValues(t, c), opaque) {
				if !strings.Contains(section, "| `"+p+"` |") {
					t.Errorf("the %s table lacks `%s`", c, p)
				}
			}
		})
	}
}

// TestServiceChartsShareTheirSchemaDefinitions: the definitions every
// service chart's schema carries (image, resources, affinity, ...) are the
// same in all of them, and the umbrella's global is theirs.
func TestServiceChartsShareTheirSchemaDefinitions(t *testing.T) {
	first := readSchema(t, serviceCharts[0])["definitions"]
	for _, c := range serviceCharts[1:] {
		if got := readSchema(t, c)["definitions"]; !reflect.DeepEqual(got, first) {
			t.Errorf("%s's schema definitions differ from %s's", c, serviceCharts[0])
		}
	}
	u := readSchema(t, umbrella)["definitions"].(map[string]any)["global"]
	if !reflect.DeepEqual(u, first.(map[string]any)["global"]) {
		t.Error("the umbrella's global differs from the service charts'")
	}
}
