package main

import (
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func envOf(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestParseConfigDefaults(t *testing.T) {
	c, err := parseConfig(newFlagSet(), nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.MetricsAddr != ":8080" || c.ProbeAddr != ":8081" || !c.LeaderElect || !c.ProbeCredentials ||
		c.RuntimePullPolicy != corev1.PullIfNotPresent || c.LogLevel != slog.LevelInfo || c.ShutdownTimeout != 30*time.Second || c.RuntimeCommand != nil {
		t.Fatalf("defaults %+v", c)
	}
}

func TestParseConfigEnvFallbackAndFlagPrecedence(t *testing.T) {
	c, err := parseConfig(newFlagSet(),
		[]string{"--runtime-image=flag:1"},
		envOf(map[string]string{"OMNIA_RUNTIME_IMAGE": "env:1", "LEADER_ELECT": "false", "OMNIA_RUNTIME_COMMAND": "/bin/rt, --serve", "LOG_LEVEL": "debug"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.RuntimeImage != "flag:1" || c.LeaderElect || strings.Join(c.RuntimeCommand, " ") != "/bin/rt --serve" || c.LogLevel != slog.LevelDebug {
		t.Fatalf("config %+v", c)
	}
}

func TestParseConfigErrorsNameTheVariable(t *testing.T) {
	for envName, val := range map[string]string{"LEADER_ELECT": "maybe", "OMNIA_RUNTIME_IMAGE_PULL_POLICY": "Sometimes", "GRACEFUL_SHUTDOWN_TIMEOUT": "soon", "LOG_LEVEL": "loud"} {
		_, err := parseConfig(newFlagSet(), nil, envOf(map[string]string{envName: val}))
		if err == nil || !strings.Contains(err.Error(), envName) {
			t.Errorf("%s=%s: %v", envName, val, err)
		}
	}
}

func newFlagSet() *flag.FlagSet { return flag.NewFlagSet("t", flag.ContinueOnError) }

// TestNoFlagChangesConcurrency checks seed 003's "no operator flag changes
// these values" (three AgentRuntime and ToolRegistry workers, one
// PromptPack worker): no option of the binary names a worker count, and
// the spellings such a flag usually takes are refused, not silently
// accepted.
func TestNoFlagChangesConcurrency(t *testing.T) {
	for _, o := range options {
		name := strings.ToLower(o.flag + " " + o.env)
		for _, word := range []string{"concurren", "worker", "max-reconcile", "parallel"} {
			if strings.Contains(name, word) {
				t.Errorf("option %s/%s looks like a worker-count setting", o.flag, o.env)
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
			fs := newFlagSet()
			fs.SetOutput(io.Discard)
			if _, err := parseConfig(fs, []string{arg}, envOf(nil)); err == nil {
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
			c, err := parseConfig(newFlagSet(), nil, envOf(map[string]string{"OMNIA_PROMETHEUS_URL": tc.env}))
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), "OMNIA_PROMETHEUS_URL") || !strings.Contains(err.Error(), "--prometheus-url") {
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
