package main

import (
	"flag"
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
