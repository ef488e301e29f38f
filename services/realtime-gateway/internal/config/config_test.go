package config

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/service/servicetest"
)

func parse(t *testing.T, args []string, env map[string]string) (*Config, error) {
	t.Helper()
	return Parse(args, func(k string) string { return env[k] }, &bytes.Buffer{})
}

// TestDefaults checks the documented defaults; the key Secret's namespace
// is the pod's unless set.
func TestDefaults(t *testing.T) {
	c, err := parse(t, nil, map[string]string{"POD_NAMESPACE": "plat"})
	if err != nil {
		t.Fatal(err)
	}
	if c.GRPCBindAddress != ":9443" || c.MetricsBindAddress != ":8080" || c.HealthProbeBindAddress != ":8081" ||
		c.ShutdownTimeout != 30*time.Second || c.KeySecretNamespace != "plat" || c.Kube.QPS != 50 || c.Kube.Burst != 100 ||
		c.DialTimeout != 5*time.Second || c.IdleConnTimeout != 5*time.Minute || c.AuthCacheTTL != 10*time.Second ||
		c.DeniedCacheTTL != 2*time.Second || c.TLSCertFile != "" || !slices.Equal(c.TokenAudiences, []string{DefaultTokenAudience}) {
		t.Fatalf("config %+v", c)
	}
}

// TestTokenAudiences: the audiences are a comma-separated list; only an
// explicit empty flag turns them off, since an empty variable is unset.
func TestTokenAudiences(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"by default the gateway's own audience is required", nil, nil, []string{DefaultTokenAudience}},
		{"the flag takes a comma-separated list", []string{"--token-audiences=a, b"}, nil, []string{"a", "b"}},
		{"the variable takes one too", nil, map[string]string{"TOKEN_AUDIENCES": "a,b"}, []string{"a", "b"}},
		{"an explicit empty flag accepts plain API tokens", []string{"--token-audiences="}, map[string]string{"TOKEN_AUDIENCES": "a"}, nil},
		{"an empty variable leaves the default", nil, map[string]string{"TOKEN_AUDIENCES": ""}, []string{DefaultTokenAudience}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"POD_NAMESPACE": "plat"}
			for k, v := range tc.env {
				env[k] = v
			}
			c, err := parse(t, tc.args, env)
			if err != nil || !slices.Equal(c.TokenAudiences, tc.want) {
				t.Fatalf("Parse = %v, %v; want audiences %q", c, err, tc.want)
			}
		})
	}
}

// TestFlagsOverrideEnvAndEnvOverridesDefaults checks the precedence the
// deploy relies on.
func TestFlagsOverrideEnvAndEnvOverridesDefaults(t *testing.T) {
	env := map[string]string{"GRPC_BIND_ADDRESS": ":7000", "POD_NAMESPACE": "plat", "SHUTDOWN_TIMEOUT": "3s",
		"KEY_SECRET_NAMESPACE": "keys", "TLS_CERT_FILE": "c.pem", "TLS_PRIVATE_KEY_FILE": "k.pem", "AUTH_CACHE_TTL": "0s"}
	c, err := parse(t, []string{"--shutdown-timeout=9s"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.GRPCBindAddress != ":7000" || c.KeySecretNamespace != "keys" || c.ShutdownTimeout != 9*time.Second ||
		c.TLSCertFile != "c.pem" || c.TLSPrivateKeyFile != "k.pem" || c.AuthCacheTTL != 0 || c.Pod.Namespace != "plat" {
		t.Fatalf("config %+v", c)
	}
}

// TestBadValuesNameTheFlag checks that each refused value names its flag
// or variable.
func TestBadValuesNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"a negative shutdown timeout is refused", []string{"--shutdown-timeout=-1s"}, nil, "--shutdown-timeout"},
		{"a zero dial timeout is refused", []string{"--dial-timeout=0s"}, nil, "DIAL_TIMEOUT"},
		{"a garbled idle timeout is refused", []string{"--idle-conn-timeout=soon"}, nil, "idle-conn-timeout"},
		{"a garbled variable is refused by name", nil, map[string]string{"DENIED_CACHE_TTL": "2"}, "DENIED_CACHE_TTL"},
		{"a negative cache TTL is refused", []string{"--auth-cache-ttl=-1s"}, nil, "--auth-cache-ttl"},
		{"a certificate without a key is refused", []string{"--tls-cert-file=c.pem"}, nil, "--tls-private-key-file"},
		{"a key without a certificate is refused", nil, map[string]string{"TLS_PRIVATE_KEY_FILE": "k.pem"}, "--tls-cert-file"},
		{"an empty key namespace is refused", []string{"--pod-namespace="}, nil, "--key-secret-namespace"},
		{"an empty audience in the list is refused", []string{"--token-audiences=a,,b"}, nil, "--token-audiences"},
		{"an unknown log level is refused", []string{"--log-level=verbose"}, nil, "--log-level"},
		{"the old flag names are gone", []string{"--shutdown-grace=1s"}, nil, "shutdown-grace"},
		{"stray arguments are refused", []string{"extra"}, nil, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.args, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q, %v) = %v, want an error naming %s", tc.args, tc.env, err, tc.want)
			}
		})
	}
}

// TestDocsFlagTable keeps the flag table of docs/realtime-gateway.md in
// step with the flags; AGENTPLANE_UPDATE_DOCS=1 rewrites it.
func TestTheDocsListEveryFlag(t *testing.T) {
	fs, _ := newFlagSet(func(string) string { return "" })
	servicetest.CheckDocTable(t, fs, "../../../../docs/realtime-gateway.md")
}
