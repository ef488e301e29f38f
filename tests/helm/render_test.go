package helm

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rule is one documented behaviour of a chart: render it with values and
// check what comes out.
type rule struct {
	name   string
	chart  string
	values string
	check  func(t *testing.T, r *rendered)
}

// appVersion is the charts' appVersion, which image tags default to.
const appVersion = "0.1.0"

func wantArgs(t *testing.T, r *rendered, deployment string, want ...string) {
	t.Helper()
	args := r.args(t, deployment)
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("%s args lack %q; args: %q", deployment, w, args)
		}
	}
}

// wantNoFlag fails when a Deployment passes the flag at all.
func wantNoFlag(t *testing.T, r *rendered, deployment string, flags ...string) {
	t.Helper()
	for _, a := range r.args(t, deployment) {
		for _, f := range flags {
			if a == f || strings.HasPrefix(a, f+"=") {
				t.Errorf("%s passes %q", deployment, a)
			}
		}
	}
}

func wantAbsent(t *testing.T, r *rendered, kind, namespace, name string) {
	t.Helper()
	if r.has(kind, namespace, name) {
		t.Errorf("%s is rendered", key(kind, namespace, name))
	}
}

func wantNone(t *testing.T, r *rendered, kind string) {
	t.Helper()
	for _, o := range r.ofKind(kind) {
		t.Errorf("%s is rendered", key(kind, o.GetNamespace(), o.GetName()))
	}
}

// lookup follows a path through maps (by key) and slices (by index).
func lookup(obj any, path ...string) (any, bool) {
	cur := obj
	for _, p := range path {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[p]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func field(t *testing.T, obj map[string]any, path ...string) any {
	t.Helper()
	v, ok := lookup(obj, path...)
	if !ok {
		t.Fatalf("no field %s", strings.Join(path, "."))
	}
	return v
}

func wantField(t *testing.T, obj map[string]any, want any, path ...string) {
	t.Helper()
	got, ok := lookup(obj, path...)
	if !ok || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", strings.Join(path, "."), got, want)
	}
}

// podSpec returns a Deployment's pod spec.
func podSpec(t *testing.T, r *rendered, deployment string) map[string]any {
	t.Helper()
	return field(t, r.get(t, "Deployment", releaseNS, deployment).Object, "spec", "template", "spec").(map[string]any)
}

func envNames(t *testing.T, r *rendered, deployment string) []string {
	t.Helper()
	env, _, _ := unstructured.NestedSlice(r.container(t, deployment), "env")
	var names []string
	for _, e := range env {
		names = append(names, e.(map[string]any)["name"].(string))
	}
	return names
}

// servicePorts returns a Service's ports as name → port.
func servicePorts(t *testing.T, r *rendered, name string) map[string]int64 {
	t.Helper()
	ports, _, _ := unstructured.NestedSlice(r.get(t, "Service", releaseNS, name).Object, "spec", "ports")
	out := map[string]int64{}
	for _, p := range ports {
		m := p.(map[string]any)
		out[m["name"].(string)] = m["port"].(int64)
	}
	return out
}

// rulesOf returns the rules of a Role or ClusterRole.
func rulesOf(t *testing.T, o *unstructured.Unstructured) []map[string]any {
	t.Helper()
	raw, _, _ := unstructured.NestedSlice(o.Object, "rules")
	var out []map[string]any
	for _, r := range raw {
		out = append(out, r.(map[string]any))
	}
	return out
}

// networkPolicyVerbs is what the ClusterRoles of a render grant on
// NetworkPolicies; nil when nothing.
func networkPolicyVerbs(t *testing.T, r *rendered) []any {
	t.Helper()
	var verbs []any
	for _, o := range r.ofKind("ClusterRole") {
		for _, rule := range rulesOf(t, o) {
			if slices.Contains(rule["resources"].([]any), any("networkpolicies")) {
				verbs = append(verbs, rule["verbs"].([]any)...)
			}
		}
	}
	return verbs
}

// The Deployment of each service chart, with the ports it listens on.
var deployments = map[string][]string{
	"agent-controller":  {"metrics", "health"},
	"batch-poller":      {"grpc", "metrics", "health"},
	"realtime-gateway":  {"grpc", "metrics", "health"},
	"omnia-controllers": {"metrics", "health", "activator"},
}

// leadingEnv is what a chart's container environment holds before the
// shared POD_NAME and POD_NAMESPACE: omnia-controllers' activator address.
var leadingEnv = map[string][]string{"omnia-controllers": {"POD_IP"}}

// commonRules are the rules every service chart follows.
func commonRules() []rule {
	var rules []rule
	for _, c := range serviceCharts {
		rules = append(rules,
			rule{name: c + ": image tag defaults to appVersion", chart: c, check: func(t *testing.T, r *rendered) {
				wantField(t, r.container(t, c), "agentplane/"+c+":"+appVersion, "image")
				wantField(t, r.container(t, c), "IfNotPresent", "imagePullPolicy")
			}},
			rule{name: c + ": image.tag and image.repository override the image", chart: c,
				values: "image: {repository: registry.example.com/ap/" + c + ", tag: 1.2.3, pullPolicy: Always}",
				check: func(t *testing.T, r *rendered) {
					wantField(t, r.container(t, c), "registry.example.com/ap/"+c+":1.2.3", "image")
					wantField(t, r.container(t, c), "Always", "imagePullPolicy")
				}},
			rule{name: c + ": the pod runs as uid 65532, non-root, read-only, without capabilities, RuntimeDefault seccomp", chart: c,
				check: func(t *testing.T, r *rendered) {
					pod := podSpec(t, r, c)
					wantField(t, pod, true, "securityContext", "runAsNonRoot")
					wantField(t, pod, 65532, "securityContext", "runAsUser")
					wantField(t, pod, "RuntimeDefault", "securityContext", "seccompProfile", "type")
					ctr := r.container(t, c)
					wantField(t, ctr, true, "securityContext", "runAsNonRoot")
					wantField(t, ctr, 65532, "securityContext", "runAsUser")
					wantField(t, ctr, true, "securityContext", "readOnlyRootFilesystem")
					wantField(t, ctr, false, "securityContext", "allowPrivilegeEscalation")
					wantField(t, ctr, []any{"ALL"}, "securityContext", "capabilities", "drop")
					wantField(t, ctr, "RuntimeDefault", "securityContext", "seccompProfile", "type")
				}},
			rule{name: c + ": liveness probes /healthz and readiness /readyz on the health port", chart: c,
				check: func(t *testing.T, r *rendered) {
					ctr := r.container(t, c)
					wantField(t, ctr, "/healthz", "livenessProbe", "httpGet", "path")
					wantField(t, ctr, "health", "livenessProbe", "httpGet", "port")
					wantField(t, ctr, "/readyz", "readinessProbe", "httpGet", "path")
					wantField(t, ctr, "health", "readinessProbe", "httpGet", "port")
					wantArgs(t, r, c, "--health-probe-bind-address=:8081", "--metrics-bind-address=:8080")
					ports, _, _ := unstructured.NestedSlice(ctr, "ports")
					var names []string
					for _, p := range ports {
						names = append(names, p.(map[string]any)["name"].(string))
					}
					if !reflect.DeepEqual(names, deployments[c]) {
						t.Errorf("container ports %v, want %v", names, deployments[c])
					}
				}},
			rule{name: c + ": ports move the flags, the container ports and the Service together", chart: c,
				values: "ports: {metrics: 9100, health: 9101" + map[bool]string{true: ", grpc: 7000", false: ""}[slices.Contains(deployments[c], "grpc")] + "}",
				check: func(t *testing.T, r *rendered) {
					wantArgs(t, r, c, "--metrics-bind-address=:9100", "--health-probe-bind-address=:9101")
					want := map[string]int64{"metrics": 9100}
					if slices.Contains(deployments[c], "grpc") {
						wantArgs(t, r, c, "--grpc-bind-address=:7000")
						want["grpc"] = 7000
					}
					if got := servicePorts(t, r, c); !reflect.DeepEqual(got, want) {
						t.Errorf("Service ports %v, want %v", got, want)
					}
					wantField(t, r.get(t, "Deployment", releaseNS, c).Object, "9100",
						"spec", "template", "metadata", "annotations", "prometheus.io/port")
				}},
			rule{name: c + ": resources are set by default", chart: c, check: func(t *testing.T, r *rendered) {
				for _, p := range [][]string{{"requests", "cpu"}, {"requests", "memory"}, {"limits", "cpu"}, {"limits", "memory"}} {
					field(t, r.container(t, c), append([]string{"resources"}, p...)...)
				}
			}},
			rule{name: c + ": POD_NAME and POD_NAMESPACE come from the downward API, then extraEnv", chart: c,
				values: "extraEnv: [{name: GODEBUG, value: 'http2client=0'}, {name: TOKEN, valueFrom: {secretKeyRef: {name: s, key: k}}}]",
				check: func(t *testing.T, r *rendered) {
					if got, want := envNames(t, r, c), append(slices.Clone(leadingEnv[c]), "POD_NAME", "POD_NAMESPACE", "GODEBUG", "TOKEN"); !reflect.DeepEqual(got, want) {
						t.Errorf("env %v, want %v", got, want)
					}
					env := r.container(t, c)["env"].([]any)[len(leadingEnv[c]):]
					wantField(t, env[0].(map[string]any), "metadata.name", "valueFrom", "fieldRef", "fieldPath")
					wantField(t, env[1].(map[string]any), "metadata.namespace", "valueFrom", "fieldRef", "fieldPath")
				}},
			rule{name: c + ": extraArgs are appended after the rendered flags", chart: c,
				values: "logLevel: debug\nextraArgs: ['--log-level=warn', '--experimental']",
				check: func(t *testing.T, r *rendered) {
					args := r.args(t, c)
					if len(args) < 3 || !reflect.DeepEqual(args[len(args)-2:], []string{"--log-level=warn", "--experimental"}) {
						t.Errorf("args %q do not end with the extraArgs", args)
					}
					if i := slices.Index(args, "--log-level=debug"); i < 0 || i > len(args)-3 {
						t.Errorf("args %q: the rendered --log-level must come before the extraArgs", args)
					}
				}},
			rule{name: c + ": the common flags are rendered only when set", chart: c,
				values: "logLevel: warn\nkubeApiQps: 25.5\nkubeApiBurst: 50\nshutdownTimeout: 20s",
				check: func(t *testing.T, r *rendered) {
					wantArgs(t, r, c, "--log-level=warn", "--kube-api-qps=25.5", "--kube-api-burst=50", "--shutdown-timeout=20s")
				}},
			rule{name: c + ": the binary's defaults apply to what is left empty; --kubeconfig is never passed", chart: c,
				check: func(t *testing.T, r *rendered) {
					wantNoFlag(t, r, c, "--log-level", "--kube-api-qps", "--kube-api-burst", "--shutdown-timeout", "--kubeconfig",
						"--pod-name", "--pod-namespace")
				}},
			rule{name: c + ": nodeSelector, tolerations and affinity reach the pod", chart: c,
				values: `
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: agents, effect: NoSchedule}]
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector: {matchLabels: {app.kubernetes.io/name: ` + c + `}}
imagePullSecrets: [{name: registry}]
`,
				check: func(t *testing.T, r *rendered) {
					pod := podSpec(t, r, c)
					wantField(t, pod, "linux", "nodeSelector", "kubernetes.io/os")
					wantField(t, pod, "dedicated", "tolerations", "0", "key")
					if _, ok := pod["tolerations"].([]any)[0].(map[string]any)["effect"]; !ok {
						t.Error("toleration lost its effect")
					}
					field(t, pod, "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
					wantField(t, pod["imagePullSecrets"].([]any)[0].(map[string]any), "registry", "name")
				}},
			rule{name: c + ": podAnnotations and podLabels reach the pod, the selector labels stay", chart: c,
				values: "podAnnotations: {example.com/team: agents, prometheus.io/scrape: 'false'}\npodLabels: {team: agents}",
				check: func(t *testing.T, r *rendered) {
					d := r.get(t, "Deployment", releaseNS, c).Object
					meta := field(t, d, "spec", "template", "metadata").(map[string]any)
					wantField(t, meta, "agents", "annotations", "example.com/team")
					wantField(t, meta, "false", "annotations", "prometheus.io/scrape")
					wantField(t, meta, "agents", "labels", "team")
					sel := field(t, d, "spec", "selector", "matchLabels").(map[string]any)
					for k, v := range sel {
						wantField(t, meta, v, "labels", k)
					}
				}},
			rule{name: c + ": a podLabel cannot replace a selector label", chart: c,
				values: "podLabels: {app.kubernetes.io/name: other, app.kubernetes.io/instance: other}",
				check: func(t *testing.T, r *rendered) {
					d := r.get(t, "Deployment", releaseNS, c).Object
					wantField(t, d, c, "spec", "template", "metadata", "labels", "app.kubernetes.io/name")
					wantField(t, d, releaseName, "spec", "template", "metadata", "labels", "app.kubernetes.io/instance")
				}},
			rule{name: c + ": a PodDisruptionBudget allows one pod down by default", chart: c, check: func(t *testing.T, r *rendered) {
				pdb := r.get(t, "PodDisruptionBudget", releaseNS, c).Object
				wantField(t, pdb, 1, "spec", "maxUnavailable")
				if _, ok, _ := unstructured.NestedFieldNoCopy(pdb, "spec", "minAvailable"); ok {
					t.Error("minAvailable is set too")
				}
				wantField(t, pdb, field(t, r.get(t, "Deployment", releaseNS, c).Object, "spec", "selector", "matchLabels"), "spec", "selector", "matchLabels")
			}},
			rule{name: c + ": podDisruptionBudget.minAvailable replaces maxUnavailable", chart: c,
				values: "podDisruptionBudget: {minAvailable: 50%}", check: func(t *testing.T, r *rendered) {
					pdb := r.get(t, "PodDisruptionBudget", releaseNS, c).Object
					wantField(t, pdb, "50%", "spec", "minAvailable")
					if _, ok, _ := unstructured.NestedFieldNoCopy(pdb, "spec", "maxUnavailable"); ok {
						t.Error("maxUnavailable is set too")
					}
				}},
			rule{name: c + ": podDisruptionBudget.enabled=false renders none", chart: c,
				values: "podDisruptionBudget: {enabled: false}", check: func(t *testing.T, r *rendered) {
					wantNone(t, r, "PodDisruptionBudget")
				}},
			rule{name: c + ": no ServiceMonitor by default", chart: c, check: func(t *testing.T, r *rendered) {
				wantNone(t, r, "ServiceMonitor")
			}},
			rule{name: c + ": a NetworkPolicy by default, restricting every ingress but the health port", chart: c, check: func(t *testing.T, r *rendered) {
				np := r.get(t, "NetworkPolicy", releaseNS, c).Object
				wantField(t, np, []any{"Ingress"}, "spec", "policyTypes")
				for _, in := range field(t, np, "spec", "ingress").([]any) {
					m := in.(map[string]any)
					port := m["ports"].([]any)[0].(map[string]any)["port"].(string)
					_, restricted := m["from"]
					// batch-poller's gRPC port admits agent-controller only;
					// the gateway's is the public API and admits anyone.
					want := c == "batch-poller" && port == "grpc"
					if restricted != want {
						t.Errorf("port %s restricted: %v, want %v", port, restricted, want)
					}
				}
			}},
			rule{name: c + ": networkPolicy.enabled=false renders none", chart: c, values: "networkPolicy: {enabled: false}",
				check: func(t *testing.T, r *rendered) { wantNone(t, r, "NetworkPolicy") }},
			rule{name: c + ": serviceMonitor.enabled renders a ServiceMonitor of the metrics port", chart: c,
				values: "serviceMonitor: {enabled: true, interval: 30s, scrapeTimeout: 10s, labels: {release: prometheus}}",
				check: func(t *testing.T, r *rendered) {
					sm := r.get(t, "ServiceMonitor", releaseNS, c)
					if sm.GetAPIVersion() != "monitoring.coreos.com/v1" {
						t.Errorf("apiVersion %s", sm.GetAPIVersion())
					}
					wantField(t, sm.Object, "prometheus", "metadata", "labels", "release")
					ep := field(t, sm.Object, "spec", "endpoints").([]any)[0].(map[string]any)
					wantField(t, ep, "metrics", "port")
					wantField(t, ep, "/metrics", "path")
					wantField(t, ep, "30s", "interval")
					wantField(t, ep, "10s", "scrapeTimeout")
					// It selects the chart's Service.
					svc := r.get(t, "Service", releaseNS, c)
					for k, v := range field(t, sm.Object, "spec", "selector", "matchLabels").(map[string]any) {
						wantField(t, svc.Object, v, "metadata", "labels", k)
					}
				}},
			rule{name: c + ": networkPolicy.enabled admits the health port from anywhere and the metrics port from metricsFrom", chart: c,
				values: "networkPolicy: {enabled: true, metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]}",
				check: func(t *testing.T, r *rendered) {
					np := r.get(t, "NetworkPolicy", releaseNS, c).Object
					wantField(t, np, []any{"Ingress"}, "spec", "policyTypes")
					ingress := field(t, np, "spec", "ingress").([]any)
					byPort := map[string]map[string]any{}
					for _, in := range ingress {
						m := in.(map[string]any)
						byPort[m["ports"].([]any)[0].(map[string]any)["port"].(string)] = m
					}
					if _, ok := byPort["health"]["from"]; ok {
						t.Error("the health port is restricted")
					}
					wantField(t, byPort["metrics"], "monitoring", "from", "0", "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name")
					if _, hasGRPC := byPort["grpc"]; hasGRPC != slices.Contains(deployments[c], "grpc") {
						t.Errorf("gRPC rule present: %v", hasGRPC)
					}
				}},
			rule{name: c + ": rbac.create=false renders no RBAC", chart: c, values: "rbac: {create: false}",
				check: func(t *testing.T, r *rendered) {
					for _, k := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
						wantNone(t, r, k)
					}
					r.get(t, "ServiceAccount", releaseNS, c)
				}},
			rule{name: c + ": serviceAccount.create=false runs as the named ServiceAccount and creates none", chart: c,
				values: "serviceAccount: {create: false, name: existing}", check: func(t *testing.T, r *rendered) {
					wantNone(t, r, "ServiceAccount")
					wantField(t, podSpec(t, r, c), "existing", "serviceAccountName")
					for _, b := range append(r.ofKind("ClusterRoleBinding"), r.ofKind("RoleBinding")...) {
						wantField(t, b.Object, "existing", "subjects", "0", "name")
					}
				}},
			rule{name: c + ": serviceAccount annotations reach the ServiceAccount", chart: c,
				values: "serviceAccount: {annotations: {eks.amazonaws.com/role-arn: 'arn:aws:iam::1:role/x'}}", check: func(t *testing.T, r *rendered) {
					sa := r.get(t, "ServiceAccount", releaseNS, c)
					wantField(t, sa.Object, "arn:aws:iam::1:role/x", "metadata", "annotations", "eks.amazonaws.com/role-arn")
					wantField(t, podSpec(t, r, c), c, "serviceAccountName")
				}},
			rule{name: c + ": fullnameOverride renames the namespaced and the cluster-scoped objects", chart: c,
				values: "fullnameOverride: ap-x", check: func(t *testing.T, r *rendered) {
					r.get(t, "Deployment", releaseNS, "ap-x")
					r.get(t, "Service", releaseNS, "ap-x")
					r.get(t, "ServiceAccount", releaseNS, "ap-x")
					r.get(t, "ClusterRole", "", releaseNS+"-ap-x")
					wantAbsent(t, r, "Deployment", releaseNS, c)
				}},
			rule{name: c + ": ClusterRoles are named after the release namespace", chart: c, check: func(t *testing.T, r *rendered) {
				cr := r.get(t, "ClusterRole", "", releaseNS+"-"+c)
				crb := r.get(t, "ClusterRoleBinding", "", releaseNS+"-"+c)
				wantField(t, crb.Object, cr.GetName(), "roleRef", "name")
				wantField(t, crb.Object, releaseNS, "subjects", "0", "namespace")
			}},
			rule{name: c + ": the NOTES say how to launch a first run with agentctl or kubectl", chart: c,
				check: func(t *testing.T, r *rendered) { wantFirstRun(t, r.notes) }},
		)
	}
	return rules
}

func wantFirstRun(t *testing.T, notes string) {
	t.Helper()
	for _, w := range []string{"kind: AgentDefinition", "kind: Station", "agentctl -n default run --station echo",
		"kind: Agent\n", "stationRef: echo", "kubectl -n default get agents"} {
		if !strings.Contains(notes, w) {
			t.Errorf("NOTES lack %q:\n%s", w, notes)
		}
	}
}

// serviceRules are each service chart's own rules.
func serviceRules() []rule {
	const ac, bp, rg, oc = "agent-controller", "batch-poller", "realtime-gateway", "omnia-controllers"
	return []rule{
		{name: "agent-controller: 2 replicas with leader election on the agent-controller Lease", chart: ac, check: func(t *testing.T, r *rendered) {
			wantField(t, r.get(t, "Deployment", releaseNS, ac).Object, 2, "spec", "replicas")
			wantArgs(t, r, ac, "--leader-elect=true", "--leader-election-id=agent-controller")
			wantNoFlag(t, r, ac, "--leader-election-namespace", "--leader-elect-lease-duration", "--leader-elect-renew-deadline", "--leader-elect-retry-period")
			role := r.get(t, "Role", releaseNS, "agent-controller-leader-election")
			wantField(t, role.Object, []any{"leases"}, "rules", "0", "resources")
		}},
		{name: "agent-controller: the defaults render exactly the flags the chart decides", chart: ac, check: func(t *testing.T, r *rendered) {
			want := []string{"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--leader-elect=true",
				"--leader-election-id=agent-controller", "--supervisor-image=agentplane/supervisor:" + appVersion,
				"--realtime-enabled=false", "--batch-enabled=false", "--run-network-policy=true", "--gateway-namespace=" + releaseNS}
			if got := r.args(t, ac); !reflect.DeepEqual(got, want) {
				t.Errorf("args %q, want %q", got, want)
			}
		}},
		{name: "agent-controller: every value reaches its flag", chart: ac, values: `
watchNamespace: team-a
maxOutputBytes: 1048576
pollInterval: 30s
workers: 8
eventQps: 12.5
eventBurst: 40
natsUrl: nats://nats.messaging.svc:4222
podSecurityLevel: baseline
supervisor: {image: {repository: registry.example.com/supervisor, tag: 9.9.9}, path: /opt/supervisor}
leaderElection: {leaseDuration: 30s, renewDeadline: 20s, retryPeriod: 4s, id: other-lease}
`, check: func(t *testing.T, r *rendered) {
			wantArgs(t, r, ac, "--watch-namespace=team-a", "--max-output-bytes=1048576", "--poll-interval=30s", "--workers=8", "--pod-security-level=baseline",
				"--event-qps=12.5", "--event-burst=40", "--nats-url=nats://nats.messaging.svc:4222", "--supervisor-image=registry.example.com/supervisor:9.9.9",
				"--supervisor-path=/opt/supervisor", "--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s",
				"--leader-elect-retry-period=4s", "--leader-election-id=other-lease")
		}},
		{name: "agent-controller: leader election off renders --leader-elect=false and no Lease Role", chart: ac,
			values: "leaderElection: {enabled: false}\nreplicaCount: 1", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, ac, "--leader-elect=false")
				wantNoFlag(t, r, ac, "--leader-election-id")
				wantNone(t, r, "Role")
				wantNone(t, r, "RoleBinding")
			}},
		{name: "agent-controller: leaderElection.namespace moves the Lease and its Role", chart: ac,
			values: "leaderElection: {namespace: leases}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, ac, "--leader-election-namespace=leases")
				r.get(t, "Role", "leases", "agent-controller-leader-election")
				rb := r.get(t, "RoleBinding", "leases", "agent-controller-leader-election")
				wantField(t, rb.Object, releaseNS, "subjects", "0", "namespace")
			}},
		{name: "agent-controller: realtime off grants nothing on Secrets", chart: ac, check: func(t *testing.T, r *rendered) {
			for _, k := range []string{"ClusterRole", "Role"} {
				for _, o := range r.ofKind(k) {
					for _, rule := range rulesOf(t, o) {
						if slices.Contains(rule["resources"].([]any), any("secrets")) {
							t.Errorf("%s %s grants %v", k, o.GetName(), rule)
						}
					}
				}
			}
			wantNoFlag(t, r, ac, "--realtime-key-namespace")
		}},
		{name: "agent-controller: realtime.enabled grants the token Secrets (create, and get to check a taken name) and the shared key, in realtime.keyNamespace", chart: ac,
			values: "realtime: {enabled: true, keyNamespace: keys}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, ac, "--realtime-enabled=true", "--realtime-key-namespace=keys")
				cr := r.get(t, "ClusterRole", "", releaseNS+"-agent-controller-realtime")
				wantField(t, cr.Object, []any{"create", "get"}, "rules", "0", "verbs")
				role := r.get(t, "Role", "keys", "agent-controller-realtime-key")
				wantField(t, role.Object, []any{"agentplane-realtime-key"}, "rules", "0", "resourceNames")
				wantField(t, role.Object, []any{"get"}, "rules", "0", "verbs")
				r.get(t, "RoleBinding", "keys", "agent-controller-realtime-key")
				r.get(t, "ClusterRoleBinding", "", releaseNS+"-agent-controller-realtime")
			}},
		{name: "agent-controller: global.realtime.enabled turns realtime on, the key in the release namespace", chart: ac,
			values: "global: {realtime: {enabled: true}}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, ac, "--realtime-enabled=true", "--realtime-key-namespace="+releaseNS)
				r.get(t, "Role", releaseNS, "agent-controller-realtime-key")
			}},
		{name: "agent-controller: every run pod gets a NetworkPolicy by default, admitting the gateway chart's pods of the release namespace", chart: ac,
			check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, ac, "--run-network-policy=true", "--gateway-namespace="+releaseNS)
				// The binary's default is the realtime-gateway chart's label.
				wantNoFlag(t, r, ac, "--gateway-pod-labels")
				if got := networkPolicyVerbs(t, r); fmt.Sprint(got) != "[get create update]" {
					t.Errorf("networkpolicies verbs %v, want get, create and update", got)
				}
			}},
		{name: "agent-controller: runNetworkPolicy.enabled=false passes it on and grants nothing on NetworkPolicies", chart: ac,
			values: "runNetworkPolicy: {enabled: false}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, ac, "--run-network-policy=false")
				wantNoFlag(t, r, ac, "--gateway-namespace", "--gateway-pod-labels")
				if got := networkPolicyVerbs(t, r); got != nil {
					t.Errorf("networkpolicies verbs %v, want none", got)
				}
			}},
		{name: "agent-controller: runNetworkPolicy.gatewayNamespace and gatewayPodLabels name the gateway", chart: ac,
			values: "runNetworkPolicy: {gatewayNamespace: edge, gatewayPodLabels: {tier: edge, app: gw}}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, ac, "--gateway-namespace=edge", "--gateway-pod-labels=app=gw,tier=edge")
			}},
		{name: "agent-controller: batch on points at batch-poller in the release namespace", chart: ac,
			values: "batch: {enabled: true}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, ac, "--batch-enabled=true", "--batch-poller-address=batch-poller."+releaseNS+".svc:9090")
				wantNoFlag(t, r, ac, "--batch-poll-seconds")
			}},
		{name: "agent-controller: batch.pollerAddress and batch.pollSeconds override the defaults", chart: ac,
			values: "global: {batch: {enabled: true}}\nbatch: {pollerAddress: 'poller.elsewhere:9090', pollSeconds: 30}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, ac, "--batch-enabled=true", "--batch-poller-address=poller.elsewhere:9090", "--batch-poll-seconds=30")
			}},
		{name: "agent-controller: global.natsUrl is the default NATS URL, natsUrl overrides it", chart: ac,
			values: "global: {natsUrl: 'nats://global:4222'}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, ac, "--nats-url=nats://global:4222")
			}},
		{name: "agent-controller: natsUrl wins over global.natsUrl", chart: ac,
			values: "global: {natsUrl: 'nats://global:4222'}\nnatsUrl: 'nats://own:4222'", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, ac, "--nats-url=nats://own:4222")
				wantNoFlag(t, r, ac, "--nats-url=nats://global:4222")
			}},
		{name: "agent-controller: whole numbers render without an exponent", chart: ac,
			values: "maxOutputBytes: 20000000\nkubeApiBurst: 1000000", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, ac, "--max-output-bytes=20000000", "--kube-api-burst=1000000")
			}},

		{name: "batch-poller: without NATS one replica, replaced with the Recreate strategy", chart: bp, check: func(t *testing.T, r *rendered) {
			d := r.get(t, "Deployment", releaseNS, bp).Object
			wantField(t, d, 1, "spec", "replicas")
			wantField(t, d, "Recreate", "spec", "strategy", "type")
			wantArgs(t, r, bp, "--grpc-bind-address=:9090")
			wantNoFlag(t, r, bp, "--leader-elect", "--state-bucket", "--state-replicas", "--state-ttl")
		}},
		{name: "batch-poller: with NATS two replicas share the state bucket and roll one at a time", chart: bp,
			values: "natsUrl: nats://nats:4222\nstate: {bucket: TEAM_BATCHES, replicas: 3, ttl: 48h}", check: func(t *testing.T, r *rendered) {
				d := r.get(t, "Deployment", releaseNS, bp).Object
				wantField(t, d, 2, "spec", "replicas")
				wantField(t, d, "RollingUpdate", "spec", "strategy", "type")
				wantField(t, d, 0, "spec", "strategy", "rollingUpdate", "maxUnavailable")
				wantArgs(t, r, bp, "--nats-url=nats://nats:4222", "--state-bucket=TEAM_BATCHES", "--state-replicas=3", "--state-ttl=48h")
			}},
		{name: "batch-poller: global.natsUrl counts as NATS, and an explicit replicaCount wins", chart: bp,
			values: "global: {natsUrl: nats://nats:4222}\nreplicaCount: 3", check: func(t *testing.T, r *rendered) {
				d := r.get(t, "Deployment", releaseNS, bp).Object
				wantField(t, d, 3, "spec", "replicas")
				wantField(t, d, "RollingUpdate", "spec", "strategy", "type")
			}},
		{name: "batch-poller: the Service exposes gRPC and metrics", chart: bp, check: func(t *testing.T, r *rendered) {
			if got, want := servicePorts(t, r, bp), map[string]int64{"grpc": 9090, "metrics": 8080}; !reflect.DeepEqual(got, want) {
				t.Errorf("Service ports %v, want %v", got, want)
			}
		}},
		{name: "batch-poller: every value reaches its flag, fractions of a second included", chart: bp, values: `
batchPollSeconds: 0.5
batchPollConcurrency: 64
natsUrl: nats://nats:4222
anthropicBaseUrl: https://anthropic.internal
openaiBaseUrl: https://openai.internal/v1
geminiBaseUrl: https://gemini.internal
`, check: func(t *testing.T, r *rendered) {
			wantArgs(t, r, bp, "--batch-poll-seconds=0.5", "--batch-poll-concurrency=64", "--nats-url=nats://nats:4222",
				"--anthropic-base-url=https://anthropic.internal", "--openai-base-url=https://openai.internal/v1",
				"--gemini-base-url=https://gemini.internal")
		}},
		{name: "batch-poller: global.natsUrl is the default NATS URL", chart: bp,
			values: "global: {natsUrl: 'nats://global:4222'}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, bp, "--nats-url=nats://global:4222")
			}},
		{name: "batch-poller: the NetworkPolicy admits BatchService calls only from the agent-controller by default", chart: bp,
			values: "networkPolicy: {enabled: true}", check: func(t *testing.T, r *rendered) {
				for _, in := range field(t, r.get(t, "NetworkPolicy", releaseNS, bp).Object, "spec", "ingress").([]any) {
					m := in.(map[string]any)
					if m["ports"].([]any)[0].(map[string]any)["port"] == "grpc" {
						wantField(t, m, "agent-controller", "from", "0", "podSelector", "matchLabels", "app.kubernetes.io/name")
						return
					}
				}
				t.Error("no gRPC rule")
			}},
		{name: "batch-poller: it may read Secrets (agent-secrets) and nothing else", chart: bp, check: func(t *testing.T, r *rendered) {
			rules := rulesOf(t, r.get(t, "ClusterRole", "", releaseNS+"-"+bp))
			if len(rules) != 1 || fmt.Sprint(rules[0]["resources"]) != "[secrets]" || fmt.Sprint(rules[0]["verbs"]) != "[get list watch]" {
				t.Errorf("rules %v", rules)
			}
		}},

		{name: "realtime-gateway: 2 replicas, gRPC on 9443, the key Secret's namespace always passed", chart: rg, check: func(t *testing.T, r *rendered) {
			wantField(t, r.get(t, "Deployment", releaseNS, rg).Object, 2, "spec", "replicas")
			wantArgs(t, r, rg, "--grpc-bind-address=:9443", "--key-secret-namespace="+releaseNS)
			r.get(t, "Role", releaseNS, "realtime-gateway-key")
			if got, want := servicePorts(t, r, rg), map[string]int64{"grpc": 9443, "metrics": 8080}; !reflect.DeepEqual(got, want) {
				t.Errorf("Service ports %v, want %v", got, want)
			}
			wantField(t, r.get(t, "Service", releaseNS, rg).Object, "ClusterIP", "spec", "type")
		}},
		{name: "realtime-gateway: without tls no Secret is mounted and no TLS flag passed", chart: rg, check: func(t *testing.T, r *rendered) {
			wantNoFlag(t, r, rg, "--tls-cert-file", "--tls-private-key-file")
			if _, ok := podSpec(t, r, rg)["volumes"]; ok {
				t.Error("volumes rendered")
			}
			wantNone(t, r, "Certificate")
		}},
		{name: "realtime-gateway: tls.certManager renders a Certificate whose Secret the Deployment mounts", chart: rg, values: `
tls:
  certManager:
    enabled: true
    issuerRef: {name: private-ca, kind: ClusterIssuer}
    dnsNames: [gateway.example.com]
    duration: 720h
    renewBefore: 240h
`, check: func(t *testing.T, r *rendered) {
			crt := r.get(t, "Certificate", releaseNS, rg).Object
			wantField(t, crt, "cert-manager.io/v1", "apiVersion")
			wantField(t, crt, "realtime-gateway-tls", "spec", "secretName")
			wantField(t, crt, "private-ca", "spec", "issuerRef", "name")
			wantField(t, crt, "ClusterIssuer", "spec", "issuerRef", "kind")
			wantField(t, crt, "cert-manager.io", "spec", "issuerRef", "group")
			wantField(t, crt, "720h", "spec", "duration")
			wantField(t, crt, "240h", "spec", "renewBefore")
			svc := rg + "." + releaseNS
			wantField(t, crt, []any{rg, svc, svc + ".svc", svc + ".svc.cluster.local", "gateway.example.com"}, "spec", "dnsNames")
			wantField(t, podSpec(t, r, rg), "realtime-gateway-tls", "volumes", "0", "secret", "secretName")
			wantArgs(t, r, rg, "--tls-cert-file=/etc/agentplane/tls/tls.crt", "--tls-private-key-file=/etc/agentplane/tls/tls.key")
		}},
		{name: "realtime-gateway: tls.secretName names the Secret cert-manager writes", chart: rg,
			values: "tls: {secretName: gw-cert, certManager: {enabled: true, issuerRef: {name: ca}}}", check: func(t *testing.T, r *rendered) {
				wantField(t, r.get(t, "Certificate", releaseNS, rg).Object, "gw-cert", "spec", "secretName")
				wantField(t, r.get(t, "Certificate", releaseNS, rg).Object, "Issuer", "spec", "issuerRef", "kind")
				wantField(t, podSpec(t, r, rg), "gw-cert", "volumes", "0", "secret", "secretName")
			}},
		{name: "realtime-gateway: callers' tokens must be for the gateway's audience by default", chart: rg, check: func(t *testing.T, r *rendered) {
			wantArgs(t, r, rg, "--token-audiences=agentplane-realtime-gateway")
		}},
		{name: "realtime-gateway: tokenAudiences lists the audiences", chart: rg, values: "tokenAudiences: [a, b]", check: func(t *testing.T, r *rendered) {
			wantArgs(t, r, rg, "--token-audiences=a,b")
		}},
		{name: "realtime-gateway: an empty tokenAudiences passes an explicit empty flag, not the binary default", chart: rg, values: "tokenAudiences: []",
			check: func(t *testing.T, r *rendered) {
				args := r.args(t, rg)
				if n := slices.Index(args, "--token-audiences="); n < 0 || slices.ContainsFunc(args[n+1:], func(a string) bool { return strings.HasPrefix(a, "--token-audiences") }) {
					t.Errorf("args %q, want --token-audiences= and no other", args)
				}
			}},
		{name: "realtime-gateway: tls.secretName mounts the Secret and passes the TLS flags", chart: rg,
			values: "tls: {secretName: gateway-tls, certFile: cert.pem, keyFile: key.pem}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, rg, "--tls-cert-file=/etc/agentplane/tls/cert.pem", "--tls-private-key-file=/etc/agentplane/tls/key.pem")
				wantField(t, podSpec(t, r, rg), "gateway-tls", "volumes", "0", "secret", "secretName")
				wantField(t, r.container(t, rg), "/etc/agentplane/tls", "volumeMounts", "0", "mountPath")
				wantField(t, r.container(t, rg), true, "volumeMounts", "0", "readOnly")
			}},
		{name: "realtime-gateway: keySecretNamespace moves the key Role and the flag", chart: rg,
			values: "keySecretNamespace: keys", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, rg, "--key-secret-namespace=keys")
				role := r.get(t, "Role", "keys", "realtime-gateway-key")
				wantField(t, role.Object, []any{"agentplane-realtime-key"}, "rules", "0", "resourceNames")
				wantAbsent(t, r, "Role", releaseNS, "realtime-gateway-key")
			}},
		{name: "realtime-gateway: every value reaches its flag", chart: rg,
			values: "dialTimeout: 3s\nidleConnTimeout: 10m\nauthCacheTtl: '0'\ndeniedCacheTtl: 1s", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, rg, "--dial-timeout=3s", "--idle-conn-timeout=10m", "--auth-cache-ttl=0", "--denied-cache-ttl=1s")
			}},
		{name: "realtime-gateway: service.type and service.annotations shape the Service", chart: rg,
			values: "service: {type: LoadBalancer, annotations: {service.beta.kubernetes.io/aws-load-balancer-type: nlb}}", check: func(t *testing.T, r *rendered) {
				svc := r.get(t, "Service", releaseNS, rg).Object
				wantField(t, svc, "LoadBalancer", "spec", "type")
				wantField(t, svc, "nlb", "metadata", "annotations", "service.beta.kubernetes.io/aws-load-balancer-type")
			}},

		{name: "omnia-controllers: 2 replicas with leader election on the omnia Lease", chart: oc, check: func(t *testing.T, r *rendered) {
			wantField(t, r.get(t, "Deployment", releaseNS, oc).Object, 2, "spec", "replicas")
			wantArgs(t, r, oc, "--leader-elect=true", "--leader-election-id=omnia-controllers.agentplane.dev")
			r.get(t, "Role", releaseNS, "omnia-controllers-leader-election")
			wantNoFlag(t, r, oc, "--runtime-image", "--runtime-command", "--runtime-image-pull-policy", "--provider-credential-probe", "--prometheus-url")
		}},
		{name: "omnia-controllers: every value reaches its flag; runtime.command is joined with commas", chart: oc, values: `
runtime: {image: 'registry.example.com/runtime:2', command: [/runtime, --serve], imagePullPolicy: Always}
providerCredentialProbe: false
prometheusUrl: http://prometheus.monitoring.svc:9090
leaderElection: {namespace: leases}
`, check: func(t *testing.T, r *rendered) {
			wantArgs(t, r, oc, "--runtime-image=registry.example.com/runtime:2", "--runtime-command=/runtime,--serve",
				"--runtime-image-pull-policy=Always", "--provider-credential-probe=false",
				"--prometheus-url=http://prometheus.monitoring.svc:9090", "--leader-election-namespace=leases")
			r.get(t, "Role", "leases", "omnia-controllers-leader-election")
		}},
		{name: "omnia-controllers: the activator listens on its port at the pod IP, admitted from anywhere", chart: oc, check: func(t *testing.T, r *rendered) {
			wantArgs(t, r, oc, "--activator-address=$(POD_IP)", "--activator-port=8082", "--activator-timeout=2m")
			env := r.container(t, oc)["env"].([]any)[0].(map[string]any)
			wantField(t, env, "POD_IP", "name")
			wantField(t, env, "status.podIP", "valueFrom", "fieldRef", "fieldPath")
			np := r.get(t, "NetworkPolicy", releaseNS, oc+"-activator").Object
			in := field(t, np, "spec", "ingress").([]any)[0].(map[string]any)
			wantField(t, in, "activator", "ports", "0", "port")
			if _, restricted := in["from"]; restricted {
				t.Error("the activator port is restricted: clients of agents are anywhere in the cluster")
			}
		}},
		{name: "omnia-controllers: activator.port and activator.timeout reach the flags and the container port", chart: oc,
			values: "activator: {enabled: true, port: 9090, timeout: 30s}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, oc, "--activator-port=9090", "--activator-timeout=30s")
				ports, _, _ := unstructured.NestedSlice(r.container(t, oc), "ports")
				wantField(t, ports[2].(map[string]any), 9090, "containerPort")
			}},
		{name: "omnia-controllers: activator.enabled=false renders no activator", chart: oc, values: "activator: {enabled: false, port: 8082, timeout: 2m}",
			check: func(t *testing.T, r *rendered) {
				wantNoFlag(t, r, oc, "--activator-address", "--activator-port", "--activator-timeout")
				wantAbsent(t, r, "NetworkPolicy", releaseNS, oc+"-activator")
				if got := envNames(t, r, oc); slices.Contains(got, "POD_IP") {
					t.Errorf("env %v has POD_IP", got)
				}
			}},
	}
}

// umbrellaRules are the agentplane chart's rules.
func umbrellaRules() []rule {
	const u = umbrella
	allOn := "global: {batch: {enabled: true}, realtime: {enabled: true}, omnia: {enabled: true}}"
	return []rule{
		{name: "agentplane: the defaults install the CRDs and the agent-controller, as the kustomize base does", chart: u, check: func(t *testing.T, r *rendered) {
			if n := len(r.ofKind("CustomResourceDefinition")); n == 0 {
				t.Error("no CRD rendered")
			}
			r.get(t, "Deployment", releaseNS, "agent-controller")
			wantArgs(t, r, "agent-controller", "--batch-enabled=false", "--realtime-enabled=false")
			if n := len(r.ofKind("Deployment")); n != 1 {
				t.Errorf("%d Deployments rendered", n)
			}
		}},
		{name: "agentplane: batch off by default renders no batch-poller", chart: u, check: func(t *testing.T, r *rendered) {
			wantAbsent(t, r, "Deployment", releaseNS, "batch-poller")
			wantAbsent(t, r, "Service", releaseNS, "batch-poller")
			wantAbsent(t, r, "ClusterRole", "", releaseNS+"-batch-poller")
		}},
		{name: "agentplane: realtime off by default renders no realtime-gateway", chart: u, check: func(t *testing.T, r *rendered) {
			wantAbsent(t, r, "Deployment", releaseNS, "realtime-gateway")
			wantAbsent(t, r, "ClusterRole", "", releaseNS+"-agent-controller-realtime")
		}},
		{name: "agentplane: omnia off by default renders no omnia-controllers", chart: u, check: func(t *testing.T, r *rendered) {
			wantAbsent(t, r, "Deployment", releaseNS, "omnia-controllers")
			wantAbsent(t, r, "ClusterRole", "", releaseNS+"-omnia-controllers")
		}},
		{name: "agentplane: global.batch.enabled installs batch-poller and points the agent-controller at it", chart: u,
			values: "global: {batch: {enabled: true}}", check: func(t *testing.T, r *rendered) {
				r.get(t, "Deployment", releaseNS, "batch-poller")
				svc := servicePorts(t, r, "batch-poller")
				wantArgs(t, r, "agent-controller", "--batch-enabled=true",
					fmt.Sprintf("--batch-poller-address=batch-poller.%s.svc:%d", releaseNS, svc["grpc"]))
				wantAbsent(t, r, "Deployment", releaseNS, "realtime-gateway")
			}},
		{name: "agentplane: global.realtime.enabled installs realtime-gateway with the agent-controller's realtime mode and RBAC", chart: u,
			values: "global: {realtime: {enabled: true}}", check: func(t *testing.T, r *rendered) {
				r.get(t, "Deployment", releaseNS, "realtime-gateway")
				wantArgs(t, r, "agent-controller", "--realtime-enabled=true", "--realtime-key-namespace="+releaseNS)
				r.get(t, "ClusterRole", "", releaseNS+"-agent-controller-realtime")
				r.get(t, "Role", releaseNS, "agent-controller-realtime-key")
				if !strings.Contains(r.notes, "create secret generic agentplane-realtime-key") {
					t.Errorf("NOTES do not say how to create the shared key:\n%s", r.notes)
				}
			}},
		{name: "agentplane: global.omnia.enabled installs omnia-controllers", chart: u,
			values: "global: {omnia: {enabled: true}}", check: func(t *testing.T, r *rendered) {
				r.get(t, "Deployment", releaseNS, "omnia-controllers")
				r.get(t, "Deployment", releaseNS, "agent-controller")
			}},
		{name: "agentplane: everything on installs the four services", chart: u, values: allOn, check: func(t *testing.T, r *rendered) {
			for _, c := range serviceCharts {
				r.get(t, "Deployment", releaseNS, c)
			}
		}},
		{name: "agentplane: global.natsUrl reaches the agent-controller and batch-poller", chart: u,
			values: "global: {batch: {enabled: true}, natsUrl: 'nats://nats:4222'}", check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, "agent-controller", "--nats-url=nats://nats:4222")
				wantArgs(t, r, "batch-poller", "--nats-url=nats://nats:4222")
			}},
		{name: "agentplane: agent-controller.enabled=false leaves the CRDs only", chart: u,
			values: "agent-controller: {enabled: false}", check: func(t *testing.T, r *rendered) {
				wantNone(t, r, "Deployment")
				if len(r.ofKind("CustomResourceDefinition")) == 0 {
					t.Error("no CRD rendered")
				}
			}},
		{name: "agentplane: a service chart's values pass through under its name", chart: u,
			values: allOn + "\nagent-controller: {workers: 16}\nbatch-poller: {batchPollConcurrency: 8}\nrealtime-gateway: {replicaCount: 3}\nomnia-controllers: {prometheusUrl: 'http://prom:9090'}",
			check: func(t *testing.T, r *rendered) {
				wantArgs(t, r, "agent-controller", "--workers=16")
				wantArgs(t, r, "batch-poller", "--batch-poll-concurrency=8")
				wantField(t, r.get(t, "Deployment", releaseNS, "realtime-gateway").Object, 3, "spec", "replicas")
				wantArgs(t, r, "omnia-controllers", "--prometheus-url=http://prom:9090")
			}},
		{name: "agentplane: the CRDs carry helm.sh/resource-policy keep", chart: u, check: func(t *testing.T, r *rendered) {
			for _, crd := range r.ofKind("CustomResourceDefinition") {
				if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
					t.Errorf("CRD %s is not kept on uninstall", crd.GetName())
				}
				if crd.GetLabels()["app.kubernetes.io/part-of"] != "agentplane" {
					t.Errorf("CRD %s lacks the part-of label", crd.GetName())
				}
			}
		}},
		{name: "agentplane: crds.keep=false drops the keep annotation", chart: u, values: "crds: {keep: false}", check: func(t *testing.T, r *rendered) {
			crds := r.ofKind("CustomResourceDefinition")
			if len(crds) == 0 {
				t.Fatal("no CRD rendered")
			}
			for _, crd := range crds {
				if _, ok := crd.GetAnnotations()["helm.sh/resource-policy"]; ok {
					t.Errorf("CRD %s is kept", crd.GetName())
				}
			}
		}},
		{name: "agentplane: crds.install=false renders no CRD", chart: u, values: "crds: {install: false}", check: func(t *testing.T, r *rendered) {
			wantNone(t, r, "CustomResourceDefinition")
			r.get(t, "Deployment", releaseNS, "agent-controller")
		}},
		{name: "agentplane: the NOTES list the components and say how to launch a first run", chart: u, check: func(t *testing.T, r *rendered) {
			wantFirstRun(t, r.notes)
			for _, w := range []string{"agent-controller on", "batch            off", "realtime         off", "omnia            off"} {
				if !strings.Contains(r.notes, w) {
					t.Errorf("NOTES lack %q:\n%s", w, r.notes)
				}
			}
		}},
		{name: "agentplane: the first run goes to the agent-controller's watched namespace", chart: u,
			values: "agent-controller: {watchNamespace: team-a}", check: func(t *testing.T, r *rendered) {
				if !strings.Contains(r.notes, "agentctl -n team-a run --station echo") {
					t.Errorf("NOTES:\n%s", r.notes)
				}
			}},
	}
}

func TestRenderRules(t *testing.T) {
	all := append(append(append(commonRules(), serviceRules()...), umbrellaRules()...), natsRules()...)
	seen := map[string]bool{}
	for _, tc := range all {
		if seen[tc.name] {
			t.Fatalf("two rules named %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, mustRender(t, tc.chart, tc.values))
		})
	}
}
