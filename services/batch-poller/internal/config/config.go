// Package config reads batch-poller's configuration from flags, each with
// an environment fallback, and refuses bad values at startup with a message
// naming the flag and variable.
package config

import (
	"flag"
	"fmt"
	"strconv"
	"time"
)

// Config is batch-poller's configuration; docs/batch-poller.md has the
// table of flags, variables and defaults.
type Config struct {
	// GRPCAddr is where BatchService, health and reflection listen.
	GRPCAddr string
	// MetricsAddr is where /metrics, /healthz and /readyz listen.
	MetricsAddr string
	// PollPeriod is the least time between two vendor reads of a batch.
	PollPeriod time.Duration
	// PollConcurrency bounds background vendor polls in flight.
	PollConcurrency int
	// NATSURL receives completion notices; empty publishes none.
	NATSURL string
	// AnthropicBaseURL, OpenAIBaseURL and GeminiBaseURL override the SDK
	// defaults (fakevendor in tests); empty keeps them.
	AnthropicBaseURL string
	OpenAIBaseURL    string
	GeminiBaseURL    string
	// Kubeconfig reaches the API server; empty is in-cluster config.
	Kubeconfig string
	// ShutdownTimeout is how long in-flight calls may finish on SIGTERM.
	ShutdownTimeout time.Duration
	// LogLevel is debug, info, warn or error.
	LogLevel string
}

// Parse reads args (without the program name) and getenv.
func Parse(args []string, getenv func(string) string) (*Config, error) {
	fs := flag.NewFlagSet("batch-poller", flag.ContinueOnError)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	c := &Config{}
	fs.StringVar(&c.GRPCAddr, "grpc-addr", env("BATCH_GRPC_ADDR", ":9090"), "listen address of the BatchService gRPC server (env BATCH_GRPC_ADDR)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", env("BATCH_METRICS_ADDR", ":8080"), "listen address of /metrics, /healthz and /readyz (env BATCH_METRICS_ADDR)")
	poll := fs.String("poll-seconds", env("BATCH_POLL_SECONDS", "60"), "poll period in seconds, fractions allowed; no batch is read at the vendor more often (env BATCH_POLL_SECONDS)")
	conc := fs.String("poll-concurrency", env("BATCH_POLL_CONCURRENCY", "32"), "vendor polls in flight at once (env BATCH_POLL_CONCURRENCY)")
	fs.StringVar(&c.NATSURL, "nats-url", getenv("NATS_URL"), "NATS server for batch completion notices; none when empty (env NATS_URL)")
	fs.StringVar(&c.AnthropicBaseURL, "anthropic-base-url", getenv("ANTHROPIC_BASE_URL"), "Anthropic API base URL; the SDK default when empty (env ANTHROPIC_BASE_URL)")
	fs.StringVar(&c.OpenAIBaseURL, "openai-base-url", getenv("OPENAI_BASE_URL"), "OpenAI API base URL, ending in /v1; the SDK default when empty (env OPENAI_BASE_URL)")
	fs.StringVar(&c.GeminiBaseURL, "gemini-base-url", getenv("GEMINI_BASE_URL"), "Gemini API base URL; the SDK default when empty (env GEMINI_BASE_URL)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", getenv("KUBECONFIG"), "kubeconfig file; in-cluster config when empty (env KUBECONFIG)")
	shutdown := fs.String("shutdown-timeout", env("SHUTDOWN_TIMEOUT", "15s"), "how long in-flight calls may finish after SIGTERM before the server stops (env SHUTDOWN_TIMEOUT)")
	fs.StringVar(&c.LogLevel, "log-level", env("LOG_LEVEL", "info"), "debug, info, warn or error (env LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	secs, err := strconv.ParseFloat(*poll, 64)
	if err != nil || secs <= 0 || secs > 86400 {
		return nil, fmt.Errorf("--poll-seconds / BATCH_POLL_SECONDS must be a number of seconds in (0, 86400], got %q", *poll)
	}
	c.PollPeriod = time.Duration(secs * float64(time.Second))
	if c.PollConcurrency, err = strconv.Atoi(*conc); err != nil || c.PollConcurrency < 1 {
		return nil, fmt.Errorf("--poll-concurrency / BATCH_POLL_CONCURRENCY must be a whole number of at least 1, got %q", *conc)
	}
	if c.ShutdownTimeout, err = time.ParseDuration(*shutdown); err != nil || c.ShutdownTimeout < 0 {
		return nil, fmt.Errorf("--shutdown-timeout / SHUTDOWN_TIMEOUT must be a duration such as 15s, got %q", *shutdown)
	}
	return c, nil
}
