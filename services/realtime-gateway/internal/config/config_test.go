package config

import (
	"strings"
	"testing"
	"time"
)

// TestFlagsOverrideEnvAndEnvOverridesDefaults checks the precedence the
// deploy relies on.
func TestFlagsOverrideEnvAndEnvOverridesDefaults(t *testing.T) {
	env := map[string]string{"GATEWAY_GRPC_ADDR": ":7000", "POD_NAMESPACE": "plat", "GATEWAY_SHUTDOWN_GRACE": "3s"}
	c, err := Parse([]string{"--shutdown-grace=9s"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.GRPCAddr != ":7000" || c.KeySecretNamespace != "plat" || c.ShutdownGrace != 9*time.Second || c.MetricsAddr != ":8081" {
		t.Fatalf("config %+v", c)
	}
}

// TestBadValuesNameTheFlag checks that each refused value names its flag.
func TestBadValuesNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a negative grace is refused", []string{"--shutdown-grace=-1s"}, "--shutdown-grace"},
		{"a zero dial timeout is refused", []string{"--dial-timeout=0s"}, "--dial-timeout"},
		{"a garbled idle timeout is refused", []string{"--idle-conn-timeout=soon"}, "--idle-conn-timeout"},
		{"a certificate without a key is refused", []string{"--tls-cert=c.pem"}, "--tls-key"},
		{"stray arguments are refused", []string{"extra"}, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.args, func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) = %v, want an error naming %s", tc.args, err, tc.want)
			}
		})
	}
}
