package main

import (
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentplane/agentplane/libs/service/servicetest"
)

func envOf(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestConfigRules(t *testing.T) {
	cases := []struct {
		rule    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(*config) bool
	}{
		{"the defaults are controller-runtime's", nil, nil, "", func(c *config) bool {
			return c.MetricsBindAddress == ":8080" && c.HealthProbeBindAddress == ":8081" && c.LeaderElection.Enabled &&
				c.LeaderElection.ID == "omnia-controllers.agentplane.dev" && c.ProbeCredentials && c.RuntimePullPolicy == corev1.PullIfNotPresent &&
				c.LogLevel == "info" && c.ShutdownTimeout == 30*time.Second && c.RuntimeCommand == nil && c.Kube.QPS == 20 && c.Kube.Burst == 30 &&
				c.RuntimeImage == "ghcr.io/agentplane/omnia-runtime:latest" && c.PrometheusURL == ""
		}},
		{"the flag beats the variable, and each variable is the flag's name by the one rule", []string{"--runtime-image=flag:1"},
			map[string]string{"RUNTIME_IMAGE": "env:1", "LEADER_ELECT": "false", "RUNTIME_COMMAND": "/bin/rt, --serve", "LOG_LEVEL": "debug"}, "",
			func(c *config) bool {
				return c.RuntimeImage == "flag:1" && !c.LeaderElection.Enabled && strings.Join(c.RuntimeCommand, " ") == "/bin/rt --serve" && c.LogLevel == "debug"
			}},
		{"RUNTIME_IMAGE sets the runtime image", nil, map[string]string{"RUNTIME_IMAGE": "env:1"}, "", func(c *config) bool { return c.RuntimeImage == "env:1" }},
		{"the old OMNIA_RUNTIME_IMAGE is not read", nil, map[string]string{"OMNIA_RUNTIME_IMAGE": "env:1"}, "", func(c *config) bool { return c.RuntimeImage != "env:1" }},
		{"SHUTDOWN_TIMEOUT bounds the graceful shutdown", nil, map[string]string{"SHUTDOWN_TIMEOUT": "5s"}, "", func(c *config) bool { return c.ShutdownTimeout == 5*time.Second }},
		{"the Lease lives in the pod's namespace unless one is given", nil, map[string]string{"POD_NAMESPACE": "agentplane-system"}, "", func(c *config) bool {
			return c.LeaseNamespace() == "agentplane-system"
		}},
		{"booleans parse with strconv.ParseBool", nil, map[string]string{"PROVIDER_CREDENTIAL_PROBE": "0"}, "", func(c *config) bool { return !c.ProbeCredentials }},
		{"a malformed boolean is refused by name", nil, map[string]string{"LEADER_ELECT": "maybe"}, "LEADER_ELECT", nil},
		{"an unknown pull policy is refused by flag and variable", nil, map[string]string{"RUNTIME_IMAGE_PULL_POLICY": "Sometimes"}, "--runtime-image-pull-policy / RUNTIME_IMAGE_PULL_POLICY", nil},
		{"a malformed shutdown timeout is refused by name", nil, map[string]string{"SHUTDOWN_TIMEOUT": "soon"}, "SHUTDOWN_TIMEOUT", nil},
		{"an unknown log level is refused by flag and variable", nil, map[string]string{"LOG_LEVEL": "loud"}, "--log-level / LOG_LEVEL", nil},
		{"without --activator-address there is no activator; its port and timeout have defaults", nil, nil, "", func(c *config) bool {
			return c.ActivatorAddress == "" && c.ActivatorPort == 8082 && c.ActivatorTimeout == 2*time.Minute && c.ClusterDomain == "cluster.local"
		}},
		{"ACTIVATOR_ADDRESS takes the pod IP", nil, map[string]string{"ACTIVATOR_ADDRESS": "10.1.2.3"}, "", func(c *config) bool { return c.ActivatorAddress == "10.1.2.3" }},
		{"an activator address that is not an IP is refused", nil, map[string]string{"ACTIVATOR_ADDRESS": "omnia.svc"}, "--activator-address / ACTIVATOR_ADDRESS", nil},
		{"a loopback activator address is refused: EndpointSlices cannot name it", nil, map[string]string{"ACTIVATOR_ADDRESS": "127.0.0.1"}, "--activator-address / ACTIVATOR_ADDRESS", nil},
		{"an activator port out of range is refused", []string{"--activator-port=70000"}, nil, "--activator-port / ACTIVATOR_PORT", nil},
		{"a non-positive activator timeout is refused", []string{"--activator-timeout=0s"}, nil, "--activator-timeout / ACTIVATOR_TIMEOUT", nil},
		{"the old --graceful-shutdown-timeout is gone", []string{"--graceful-shutdown-timeout=5s"}, nil, "graceful-shutdown-timeout", nil},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			cfg, err := parseConfig(c.args, envOf(c.env), io.Discard)
			servicetest.CheckParsed(t, cfg, err, c.wantErr, c.check)
		})
	}
}

// TestNoFlagChangesConcurrency checks that no operator flag changes the
// worker counts of docs/omnia-controllers.md (three AgentRuntime and ToolRegistry workers, one
// PromptPack worker): no option of the binary names a worker count, and
// the spellings such a flag usually takes are refused, not silently
// accepted.
func TestNoFlagChangesConcurrency(t *testing.T) {
	fs, _ := newFlagSet(envOf(nil))
	for _, f := range fs.Flags() {
		name := strings.ToLower(f.Name + " " + f.Env)
		for _, word := range []string{"concurren", "worker", "max-reconcile", "parallel"} {
			if strings.Contains(name, word) {
				t.Errorf("option %s/%s looks like a worker-count setting", f.Name, f.Env)
			}
		}
	}
	for _, arg := range []string{
		"--max-concurrent-reconciles=8",
		"--agentruntime-max-concurrent-reconciles=8",
		"--promptpack-max-concurrent-reconciles=8",
		"--toolregistry-max-concurrent-reconciles=8",
		"--concurrency=8",
		"--workers=8",
	} {
		t.Run(arg, func(t *testing.T) {
			if _, err := parseConfig([]string{arg}, envOf(nil), io.Discard); err == nil {
				t.Fatalf("%s was accepted", arg)
			}
		})
	}
}

// TestPrometheusURL: rollout analysis reads Prometheus at --prometheus-url;
// it is off by default, and anything but an absolute http(s) URL is refused
// with a message naming the flag and its variable.
func TestPrometheusURL(t *testing.T) {
	cases := []struct {
		rule, env, want string
		ok              bool
	}{
		{"unset by default: analysis steps hold", "", "", true},
		{"an http URL is taken", "http://prometheus.monitoring:9090", "http://prometheus.monitoring:9090", true},
		{"an https URL is taken", "https://metrics.example/prometheus", "https://metrics.example/prometheus", true},
		{"a relative address is refused", "prometheus:9090", "", false},
		{"another scheme is refused", "ftp://prometheus", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c, err := parseConfig(nil, envOf(map[string]string{"PROMETHEUS_URL": tc.env}), io.Discard)
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), "PROMETHEUS_URL") || !strings.Contains(err.Error(), "--prometheus-url") {
					t.Fatalf("want a refusal naming the flag and variable, got %v", err)
				}
				return
			}
			if err != nil || c.PrometheusURL != tc.want {
				t.Fatalf("PrometheusURL %q, err %v", c.PrometheusURL, err)
			}
		})
	}
}

// TestTheDocsListEveryFlag keeps docs/omnia-controllers.md's flag table
// generated from the flags (AGENTPLANE_UPDATE_DOCS=1 rewrites it).
func TestTheDocsListEveryFlag(t *testing.T) {
	fs, _ := newFlagSet(envOf(nil))
	servicetest.CheckDocTable(t, fs, "../../../../docs/omnia-controllers.md")
}
