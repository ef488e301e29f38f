package config

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaultsMatchTheReference(t *testing.T) {
	c, err := Parse(nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxOutputBytes != 262144 || c.Addr != ":8081" || c.PollInterval != 15*time.Second || !c.LeaderElect ||
		c.LeaseDuration != 15*time.Second || c.RetryPeriod != 5*time.Second || c.Identity != "agent-controller" {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestRules(t *testing.T) {
	cases := []struct {
		rule    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(*Config) bool
	}{
		{"MAX_OUTPUT_BYTES must be all digits, and the error names the variable", nil, map[string]string{"MAX_OUTPUT_BYTES": "256k"}, "MAX_OUTPUT_BYTES", nil},
		{"a flag beats its env fallback", []string{"--max-output-bytes=100"}, map[string]string{"MAX_OUTPUT_BYTES": "5"}, "", func(c *Config) bool { return c.MaxOutputBytes == 100 }},
		{"HEALTH_PORT sets the listen port", nil, map[string]string{"HEALTH_PORT": "9090"}, "", func(c *Config) bool { return c.Addr == ":9090" }},
		{"the identity is POD_NAME, then HOSTNAME", nil, map[string]string{"HOSTNAME": "h", "POD_NAME": "p"}, "", func(c *Config) bool { return c.Identity == "p" }},
		{"a malformed WORKERS is refused by name", nil, map[string]string{"WORKERS": "many"}, "WORKERS", nil},
		{"lease timings must nest", []string{"--renew-deadline=20s"}, nil, "retry-period", nil},
		{"lease timings do not matter without leader election", []string{"--leader-elect=false", "--renew-deadline=20s"}, nil, "", func(c *Config) bool { return !c.LeaderElect }},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			cfg, err := Parse(c.args, env(c.env))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %v, want an error naming %s", err, c.wantErr)
				}
				return
			}
			if err != nil || !c.check(cfg) {
				t.Fatalf("got %+v, %v", cfg, err)
			}
		})
	}
}
