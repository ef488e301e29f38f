package config

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/service"
	"github.com/agentplane/agentplane/libs/service/servicetest"
)

// caller is an allowed caller every case that does not test the flag
// passes, since the flag is required.
const caller = "system:serviceaccount:agentplane-system:agent-controller"

func TestParse(t *testing.T) {
	credsFile, caFile := natsFiles(t)
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(*Config) bool
		wantErr string
	}{
		{"defaults follow the documented table", nil, nil, func(c *Config) bool {
			return c.GRPCBindAddress == ":9090" && c.MetricsBindAddress == ":8080" && c.HealthProbeBindAddress == ":8081" &&
				c.PollPeriod == time.Minute && c.NATSURL == "" && c.Kube.Kubeconfig == "" && c.ShutdownTimeout == 15*time.Second &&
				c.PollConcurrency == 32 && c.Kube.QPS == 50 && c.Kube.Burst == 100 && c.LogLevel == "info" &&
				c.TokenAudience == "agentplane-batch-poller" && len(c.SecretNamespaces) == 0
		}, ""},
		{"allowed callers and secret namespaces are comma-separated lists", []string{
			"--allowed-callers", caller + ", system:serviceaccount:ops:debugger", "--secret-namespaces", "team-a,team-b,", "--token-audience", "aud"}, nil,
			func(c *Config) bool {
				return reflect.DeepEqual(c.AllowedCallers, []string{caller, "system:serviceaccount:ops:debugger"}) &&
					reflect.DeepEqual(c.SecretNamespaces, []string{"team-a", "team-b"}) && c.TokenAudience == "aud"
			}, ""},
		{"the durable table defaults to a bucket kept a week, named pod identity", []string{"--pod-name", "batch-poller-7d9c-x2"}, nil, func(c *Config) bool {
			return c.State.Bucket == "AGENTPLANE_BATCHES" && c.State.Replicas == 1 && c.State.TTL == 7*24*time.Hour &&
				c.PollBackoffMax == 10*time.Minute && c.Pod.Name == "batch-poller-7d9c-x2"
		}, ""},
		{"a bucket name with a dot is refused", []string{"--state-bucket", "a.b"}, nil, nil, "--state-bucket"},
		{"state replicas beyond a cluster's five are refused", []string{"--state-replicas", "6"}, nil, nil, "--state-replicas"},
		{"a state TTL shorter than a batch can live is refused", []string{"--state-ttl", "10m"}, nil, nil, "--state-ttl"},
		{"a backoff cap below the poll period is refused", []string{"--batch-poll-seconds", "120", "--batch-poll-backoff-max", "1m"}, nil, nil, "--batch-poll-backoff-max"},
		{"allowed callers are required", []string{"--allowed-callers="}, nil, nil, "ALLOWED_CALLERS"},
		{"an allowed caller must be a ServiceAccount username", []string{"--allowed-callers=agentplane-system/agent-controller"}, nil, nil, "--allowed-callers"},
		{"an allowed caller needs a namespace and a name", []string{"--allowed-callers=system:serviceaccount::agent-controller"}, nil, nil, "--allowed-callers"},
		{"an empty token audience is refused", []string{"--token-audience="}, nil, nil, "TOKEN_AUDIENCE"},
		{"a secret namespace must be a namespace name", []string{"--secret-namespaces=Team_A"}, nil, nil, "--secret-namespaces"},
		{"environment fills what flags leave out", nil, map[string]string{"BATCH_POLL_SECONDS": "0.2", "NATS_URL": "nats://x:4222",
			"ANTHROPIC_BASE_URL": "http://a", "OPENAI_BASE_URL": "http://o/v1", "GEMINI_BASE_URL": "http://g", "GRPC_BIND_ADDRESS": ":1",
			"BATCH_POLL_CONCURRENCY": "4", "METRICS_BIND_ADDRESS": ":2", "HEALTH_PROBE_BIND_ADDRESS": ":3", "KUBECONFIG": "/kc",
			"ALLOWED_CALLERS": caller, "SECRET_NAMESPACES": "team-a", "TOKEN_AUDIENCE": "aud"},
			func(c *Config) bool {
				return c.PollPeriod == 200*time.Millisecond && c.NATSURL == "nats://x:4222" && c.AnthropicBaseURL == "http://a" &&
					c.OpenAIBaseURL == "http://o/v1" && c.GeminiBaseURL == "http://g" && c.GRPCBindAddress == ":1" &&
					c.PollConcurrency == 4 && c.MetricsBindAddress == ":2" && c.HealthProbeBindAddress == ":3" && c.Kube.Kubeconfig == "/kc" &&
					reflect.DeepEqual(c.AllowedCallers, []string{caller}) && reflect.DeepEqual(c.SecretNamespaces, []string{"team-a"}) &&
					c.TokenAudience == "aud"
			}, ""},
		{"a flag wins over its variable", []string{"--batch-poll-seconds", "5"}, map[string]string{"BATCH_POLL_SECONDS": "7"},
			func(c *Config) bool { return c.PollPeriod == 5*time.Second }, ""},
		{"poll seconds must be positive", []string{"--batch-poll-seconds", "0"}, nil, nil, "BATCH_POLL_SECONDS"},
		{"poll seconds are at most a day", []string{"--batch-poll-seconds", "86401"}, nil, nil, "--batch-poll-seconds"},
		{"poll seconds must be a number", nil, map[string]string{"BATCH_POLL_SECONDS": "soon"}, nil, "BATCH_POLL_SECONDS"},
		{"poll seconds must not be NaN", []string{"--batch-poll-seconds=NaN"}, nil, nil, "--batch-poll-seconds"},
		{"poll concurrency must be at least one", []string{"--batch-poll-concurrency", "0"}, nil, nil, "BATCH_POLL_CONCURRENCY"},
		{"shutdown timeout must be a duration", nil, map[string]string{"SHUTDOWN_TIMEOUT": "x"}, nil, "SHUTDOWN_TIMEOUT"},
		{"an unknown log level is refused", []string{"--log-level=verbose"}, nil, nil, "--log-level"},
		{"the old flag names are gone", []string{"--poll-seconds=5"}, nil, nil, "poll-seconds"},
		{"the NATS credential and CA files are read from flags", []string{"--nats-creds-file", credsFile, "--nats-ca-file", caFile}, nil,
			func(c *Config) bool { return c.NATS.CredsFile == credsFile && c.NATS.CAFile == caFile }, ""},
		{"the NATS credential file falls back to its variable", nil, map[string]string{"NATS_CREDS_FILE": credsFile},
			func(c *Config) bool { return c.NATS.CredsFile == credsFile && c.NATS.CAFile == "" }, ""},
		{"a missing NATS credential file is refused at startup", []string{"--nats-creds-file", "/nonexistent/user.creds"}, nil, nil, "--nats-creds-file"},
		{"a NATS credential file that holds no credential is refused at startup", []string{"--nats-creds-file", caFile}, nil, nil, "--nats-creds-file"},
		{"a missing NATS CA file is refused at startup", []string{"--nats-ca-file", "/nonexistent/ca.crt"}, nil, nil, "--nats-ca-file"},
		{"a NATS client certificate needs its key", []string{"--nats-cert-file", caFile}, nil, nil, "--nats-key-file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"ALLOWED_CALLERS": caller}
			maps.Copy(env, tc.env)
			c, err := Parse(tc.args, func(k string) string { return env[k] }, &bytes.Buffer{})
			servicetest.CheckParsed(t, c, err, tc.wantErr, tc.check)
		})
	}
}

// natsFiles writes a service credential minted by a fresh authority and a
// file that is not one (it stands in for a CA bundle).
func natsFiles(t *testing.T) (creds, ca string) {
	t.Helper()
	a, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.Issuer().ServiceCredentials("batch-poller", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	creds, ca = filepath.Join(dir, "user.creds"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(creds, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return creds, ca
}

func TestVersionPrintsAndStops(t *testing.T) {
	var out bytes.Buffer
	if _, err := Parse([]string{"--version"}, func(string) string { return "" }, &out); !errors.Is(err, service.ErrVersion) {
		t.Fatalf("--version: %v", err)
	}
	if !strings.HasPrefix(out.String(), "batch-poller version ") {
		t.Fatalf("--version printed %q", out.String())
	}
}

// TestDocsFlagTable keeps the flag table of docs/batch-poller.md in step
// with the flags; AGENTPLANE_UPDATE_DOCS=1 rewrites it.
func TestTheDocsListEveryFlag(t *testing.T) {
	fs, _ := newFlagSet(func(string) string { return "" })
	servicetest.CheckDocTable(t, fs, "../../../../docs/batch-poller.md")
}
