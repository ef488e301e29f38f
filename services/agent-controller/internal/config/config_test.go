package config

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/service/servicetest"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestRules(t *testing.T) {
	cases := []struct {
		rule    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(*Config) bool
	}{
		{"the defaults are the documented ones", nil, nil, "", func(c *Config) bool {
			return c.MaxOutputBytes == 262144 && c.MetricsBindAddress == ":8080" && c.HealthProbeBindAddress == ":8081" &&
				c.PollInterval == 15*time.Second && c.Workers == 32 && c.PageSize == 500 && c.LeaderElection.Enabled &&
				c.LeaderElection.ID == "agent-controller" && c.LeaderElection.LeaseDuration == 15*time.Second &&
				c.LeaderElection.RetryPeriod == 2*time.Second && c.Kube.QPS == 500 && c.Kube.Burst == 1000 &&
				c.SupervisorPath == "/supervisor" && c.BatchPollerAddress == "batch-poller:9090" && c.BatchPoll == time.Minute &&
				c.ShutdownTimeout == 10*time.Second && c.WatchNamespace == "" && !c.BatchEnabled && !c.RealtimeEnabled
		}},
		{"the supervisor image is tagged with the controller's own version", nil, nil, "", func(c *Config) bool {
			return c.SupervisorImage == DefaultSupervisorImage() && strings.HasPrefix(c.SupervisorImage, "agentplane/supervisor:")
		}},
		{"SUPERVISOR_IMAGE sets the supervisor image", nil, map[string]string{"SUPERVISOR_IMAGE": "reg/sup:1"}, "", func(c *Config) bool { return c.SupervisorImage == "reg/sup:1" }},
		{"MAX_OUTPUT_BYTES must be all digits, and the error names the variable", nil, map[string]string{"MAX_OUTPUT_BYTES": "256k"}, "MAX_OUTPUT_BYTES", nil},
		{"max-output-bytes must be positive, and the error names the flag and the variable", []string{"--max-output-bytes=0"}, nil, "--max-output-bytes / MAX_OUTPUT_BYTES", nil},
		{"a flag beats its env fallback", []string{"--max-output-bytes=100"}, map[string]string{"MAX_OUTPUT_BYTES": "5"}, "", func(c *Config) bool { return c.MaxOutputBytes == 100 }},
		{"WATCH_NAMESPACE limits the controller to one namespace", nil, map[string]string{"WATCH_NAMESPACE": "team-a"}, "", func(c *Config) bool { return c.WatchNamespace == "team-a" }},
		{"metrics and probes may share one address", []string{"--metrics-bind-address=:9090", "--health-probe-bind-address=:9090"}, nil, "", func(c *Config) bool {
			return c.MetricsBindAddress == ":9090" && c.HealthProbeBindAddress == ":9090"
		}},
		{"the identity is POD_NAME", nil, map[string]string{"POD_NAME": "p"}, "", func(c *Config) bool { return c.Pod.Name == "p" }},
		{"without POD_NAME the identity is the host name, never empty", nil, nil, "", func(c *Config) bool { return c.Pod.Name != "" }},
		{"the Lease lives in the pod's namespace", nil, map[string]string{"POD_NAMESPACE": "agentplane-system"}, "", func(c *Config) bool {
			return c.LeaseNamespace() == "agentplane-system"
		}},
		{"the realtime key namespace defaults to the pod's namespace", nil, map[string]string{"POD_NAMESPACE": "agentplane-system"}, "", func(c *Config) bool {
			return c.RealtimeKeyNamespace == "agentplane-system"
		}},
		{"an explicit realtime key namespace wins", []string{"--realtime-key-namespace=keys"}, map[string]string{"POD_NAMESPACE": "agentplane-system"}, "", func(c *Config) bool {
			return c.RealtimeKeyNamespace == "keys"
		}},
		{"booleans parse with strconv.ParseBool: LEADER_ELECT=0 turns leader election off", nil, map[string]string{"LEADER_ELECT": "0"}, "", func(c *Config) bool { return !c.LeaderElection.Enabled }},
		{"booleans parse with strconv.ParseBool: BATCH_ENABLED=1 turns batch on", nil, map[string]string{"BATCH_ENABLED": "1", "BATCH_POLLER_ADDRESS": "bp:1"}, "", func(c *Config) bool {
			return c.BatchEnabled && c.BatchPollerAddress == "bp:1"
		}},
		{"a malformed boolean is refused by name", nil, map[string]string{"REALTIME_ENABLED": "yes"}, "REALTIME_ENABLED", nil},
		{"a malformed WORKERS is refused by name", nil, map[string]string{"WORKERS": "many"}, "WORKERS", nil},
		{"workers must be at least 1", []string{"--workers=0"}, nil, "--workers / WORKERS", nil},
		{"Events default to the kubelet's rate", nil, nil, "", func(c *Config) bool { return c.EventQPS == 50 && c.EventBurst == 100 }},
		{"the Event rate must be positive", []string{"--event-qps=0"}, nil, "--event-qps / EVENT_QPS", nil},
		{"the Event burst must be at least 1", nil, map[string]string{"EVENT_BURST": "0"}, "--event-burst / EVENT_BURST", nil},
		{"the poll interval must be at least 1s", nil, map[string]string{"POLL_INTERVAL": "500ms"}, "--poll-interval / POLL_INTERVAL", nil},
		{"BATCH_POLL_SECONDS may be fractional", nil, map[string]string{"BATCH_POLL_SECONDS": "0.5"}, "", func(c *Config) bool { return c.BatchPoll == 500*time.Millisecond }},
		{"BATCH_POLL_SECONDS must be positive", nil, map[string]string{"BATCH_POLL_SECONDS": "-1"}, "--batch-poll-seconds / BATCH_POLL_SECONDS", nil},
		{"the batch timeout unit must be positive", []string{"--batch-timeout-unit=0s"}, nil, "--batch-timeout-unit", nil},
		{"the batch cleanup backoff must be positive", []string{"--batch-cleanup-backoff=0s"}, nil, "--batch-cleanup-backoff", nil},
		{"an empty batch-poller address is refused when batch is on", []string{"--batch-enabled", "--batch-poller-address="}, nil, "--batch-poller-address", nil},
		{"lease timings must nest", []string{"--leader-elect-renew-deadline=20s"}, nil, "leader-elect-retry-period", nil},
		{"lease timings do not matter without leader election", []string{"--leader-elect=false", "--leader-elect-renew-deadline=20s"}, nil, "", func(c *Config) bool { return !c.LeaderElection.Enabled }},
		{"an unknown log level is refused by flag and variable", nil, map[string]string{"LOG_LEVEL": "verbose"}, "--log-level / LOG_LEVEL", nil},
		{"the client rate limit comes from the skeleton", []string{"--kube-api-qps=50", "--kube-api-burst=60"}, nil, "", func(c *Config) bool { return c.Kube.QPS == 50 && c.Kube.Burst == 60 }},
		{"run pods are held to restricted by default", nil, nil, "", func(c *Config) bool { return c.PodSecurityLevel == jobbuild.PodSecurityRestricted }},
		{"POD_SECURITY_LEVEL=baseline relaxes run pods to baseline", nil, map[string]string{"POD_SECURITY_LEVEL": "baseline"}, "", func(c *Config) bool {
			return c.PodSecurityLevel == jobbuild.PodSecurityBaseline
		}},
		{"the privileged level is refused by flag and variable", []string{"--pod-security-level=privileged"}, nil, "--pod-security-level / POD_SECURITY_LEVEL", nil},
		{"an empty --pod-security-level is refused, never read as no policy", []string{"--pod-security-level="}, nil, "--pod-security-level / POD_SECURITY_LEVEL", nil},
		{"every run pod gets a NetworkPolicy by default, admitting the gateway chart's pods of the controller's namespace", nil, map[string]string{"POD_NAMESPACE": "agentplane-system"}, "", func(c *Config) bool {
			return c.RunNetworkPolicy && c.GatewayNamespace == "agentplane-system" && len(c.GatewayPodLabels) == 1 &&
				c.GatewayPodLabels["app.kubernetes.io/name"] == "realtime-gateway"
		}},
		{"RUN_NETWORK_POLICY=false turns the run pods' NetworkPolicies off", nil, map[string]string{"RUN_NETWORK_POLICY": "false"}, "", func(c *Config) bool { return !c.RunNetworkPolicy }},
		{"an explicit gateway namespace and labels win", []string{"--gateway-namespace=gw", "--gateway-pod-labels=app=gw,tier=edge"}, map[string]string{"POD_NAMESPACE": "agentplane-system"}, "", func(c *Config) bool {
			return c.GatewayNamespace == "gw" && len(c.GatewayPodLabels) == 2 && c.GatewayPodLabels["app"] == "gw" && c.GatewayPodLabels["tier"] == "edge"
		}},
		{"malformed gateway pod labels are refused by flag and variable", []string{"--gateway-pod-labels=app in (gw)"}, nil, "--gateway-pod-labels / GATEWAY_POD_LABELS", nil},
		{"empty gateway pod labels are refused: they would admit the gateway's whole namespace", []string{"--gateway-pod-labels="}, nil, "--gateway-pod-labels / GATEWAY_POD_LABELS", nil},
		{"a gateway namespace that is no namespace name is refused", []string{"--gateway-namespace=Not_A_Namespace"}, nil, "--gateway-namespace / GATEWAY_NAMESPACE", nil},
		{"the old --addr is gone", []string{"--addr=:8081"}, nil, "addr", nil},
		{"the old --namespace is gone", []string{"--namespace=x"}, nil, "namespace", nil},
		{"the old --batch-poller-addr is gone", []string{"--batch-poller-addr=x:1"}, nil, "batch-poller-addr", nil},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			cfg, err := Parse(c.args, env(c.env), io.Discard)
			servicetest.CheckParsed(t, cfg, err, c.wantErr, c.check)
		})
	}
}

// TestTheDocsListEveryFlag keeps docs/agent-controller.md's flag table
// generated from the flags (AGENTPLANE_UPDATE_DOCS=1 rewrites it).
func TestTheDocsListEveryFlag(t *testing.T) {
	fs, _ := NewFlagSet(env(nil))
	servicetest.CheckDocTable(t, fs, "../../../../docs/agent-controller.md")
}
