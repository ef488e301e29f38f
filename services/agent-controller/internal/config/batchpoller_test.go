package config

import (
	"bytes"
	"testing"

	"github.com/agentplane/agentplane/libs/service/servicetest"
)

func TestBatchPollerTokenSources(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		check   func(*Config) bool
		wantErr string
	}{
		{"no token source is the default", nil, func(c *Config) bool {
			return c.BatchPollerTokenFile == "" && c.BatchPollerServiceAccount == "" && c.BatchPollerTokenAudience == "agentplane-batch-poller"
		}, ""},
		{"a token file is taken as it is", []string{"--batch-poller-token-file=/var/run/secrets/agentplane/batch-poller/token"},
			func(c *Config) bool {
				return c.BatchPollerTokenFile == "/var/run/secrets/agentplane/batch-poller/token"
			}, ""},
		{"a ServiceAccount is namespace/name, with its audience", []string{"--batch-poller-service-account=sys/agent-controller",
			"--batch-poller-token-audience=aud"}, func(c *Config) bool {
			return c.BatchPollerServiceAccount == "sys/agent-controller" && c.BatchPollerTokenAudience == "aud"
		}, ""},
		{"a ServiceAccount without its namespace is refused", []string{"--batch-poller-service-account=agent-controller"}, nil,
			"BATCH_POLLER_SERVICE_ACCOUNT"},
		{"both sources at once are refused", []string{"--batch-poller-service-account=sys/ac", "--batch-poller-token-file=/t"}, nil,
			"exclude each other"},
		{"an empty audience for a requested token is refused", []string{"--batch-poller-service-account=sys/ac",
			"--batch-poller-token-audience="}, nil, "BATCH_POLLER_TOKEN_AUDIENCE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.args, func(string) string { return "" }, &bytes.Buffer{})
			servicetest.CheckParsed(t, c, err, tc.wantErr, tc.check)
		})
	}
}
