package config

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(*Config) bool
		wantErr bool
	}{
		{"defaults follow the documented table", nil, nil, func(c *Config) bool {
			return c.GRPCAddr == ":9090" && c.MetricsAddr == ":8080" && c.PollPeriod == time.Minute &&
				c.NATSURL == "" && c.Kubeconfig == "" && c.ShutdownTimeout == 15*time.Second && c.PollConcurrency == 32
		}, false},
		{"environment fills what flags leave out", nil, map[string]string{"BATCH_POLL_SECONDS": "0.2", "NATS_URL": "nats://x:4222",
			"ANTHROPIC_BASE_URL": "http://a", "OPENAI_BASE_URL": "http://o/v1", "GEMINI_BASE_URL": "http://g", "BATCH_GRPC_ADDR": ":1"},
			func(c *Config) bool {
				return c.PollPeriod == 200*time.Millisecond && c.NATSURL == "nats://x:4222" && c.AnthropicBaseURL == "http://a" &&
					c.OpenAIBaseURL == "http://o/v1" && c.GeminiBaseURL == "http://g" && c.GRPCAddr == ":1"
			}, false},
		{"a flag wins over its variable", []string{"--poll-seconds", "5"}, map[string]string{"BATCH_POLL_SECONDS": "7"},
			func(c *Config) bool { return c.PollPeriod == 5*time.Second }, false},
		{"poll seconds must be positive", []string{"--poll-seconds", "0"}, nil, nil, true},
		{"poll seconds must be a number", nil, map[string]string{"BATCH_POLL_SECONDS": "soon"}, nil, true},
		{"poll concurrency must be at least one", []string{"--poll-concurrency", "0"}, nil, nil, true},
		{"shutdown timeout must be a duration", []string{"--shutdown-timeout", "x"}, nil, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.args, func(k string) string { return tc.env[k] })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && !tc.check(c) {
				t.Errorf("config = %+v", c)
			}
		})
	}
}
