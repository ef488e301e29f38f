// Package config reads batch-poller's configuration from flags, each with
// the environment fallback libs/service derives from its name, and refuses
// bad values at startup with a message naming the flag and variable.
package config

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/service"
)

// Name is the service's name in logs, metrics and --version.
const Name = "batch-poller"

// Config is batch-poller's configuration; the flag table in
// docs/batch-poller.md is generated from newFlagSet.
type Config struct {
	// Options are the skeleton's: log level, metrics and probe addresses,
	// shutdown timeout, Kubernetes client, gRPC address.
	service.Options
	// PollPeriod is the least time between two vendor reads of a batch.
	PollPeriod time.Duration
	// PollConcurrency bounds background vendor polls in flight.
	PollConcurrency int
	// NATSURL receives completion notices; empty publishes none.
	NATSURL string
	// NATS is how batch-poller authenticates to NATS and verifies the
	// server: a service credential and a CA, each a mounted file.
	NATS natsauth.Client
	// AnthropicBaseURL, OpenAIBaseURL and GeminiBaseURL override the SDK
	// defaults (fakevendor in tests); empty keeps them.
	AnthropicBaseURL string
	OpenAIBaseURL    string
	GeminiBaseURL    string
	// TokenAudience is the audience a caller's ServiceAccount token must
	// be issued for.
	TokenAudience string
	// AllowedCallers are the usernames (system:serviceaccount:NS:NAME)
	// that may call BatchService; everyone else is refused.
	AllowedCallers []string
	// SecretNamespaces are the namespaces whose agent-secrets are read;
	// empty reads every namespace.
	SecretNamespaces []string
	// Pod names this replica; its name marks the submits it claims.
	Pod service.PodOptions
	// PollBackoffMax caps the wait between polls of a batch whose polls
	// keep failing.
	PollBackoffMax time.Duration
	// State is where the table of each run's batch is kept.
	State StateOptions
}

// StateOptions shape the JetStream key-value bucket of the durable table
// (docs/batch-poller.md, "Durable state"); without --nats-url the table
// lives in the process.
type StateOptions struct {
	// Bucket is the bucket's name.
	Bucket string
	// Replicas is the bucket's JetStream replicas when batch-poller
	// creates it.
	Replicas int
	// TTL drops a run's record this long after its last write.
	TTL time.Duration
}

// DefaultTokenAudience is the audience agent-controller's projected token
// is issued for (the charts' default too).
const DefaultTokenAudience = "agentplane-batch-poller"

// saPrefix starts every ServiceAccount username.
const saPrefix = "system:serviceaccount:"

// maxPollSeconds caps the poll period at a day: a longer one is a typo,
// and the vendors expire batches within a day anyway.
const maxPollSeconds = 86400

// newFlagSet registers every flag of batch-poller on a FlagSet reading
// getenv, with the checks that run after parsing.
func newFlagSet(getenv func(string) string) (*service.FlagSet, *Config) {
	fs := service.NewFlagSet(Name, getenv)
	c := &Config{}
	fs.AddServing(&c.Options, service.ServingDefaults{Metrics: ":8080", Health: ":8081", ShutdownTimeout: 15 * time.Second})
	fs.AddKube(&c.Kube, 50, 100)
	fs.AddGRPC(&c.GRPCBindAddress, ":9090")
	var pollSeconds float64
	fs.Float64Var(&pollSeconds, "batch-poll-seconds", 60,
		"poll period in seconds, fractions allowed (0.2 in tests); no batch is read at the vendor more than once per period")
	fs.IntVar(&c.PollConcurrency, "batch-poll-concurrency", 32, "background vendor polls in flight at once")
	fs.StringVar(&c.NATSURL, "nats-url", "", "NATS server for batch completion notices; none are published when empty")
	c.NATS.AddFlags(fs)
	fs.AddPod(&c.Pod)
	fs.StringVar(&c.State.Bucket, "state-bucket", "AGENTPLANE_BATCHES",
		"JetStream key-value bucket holding each run's batch, shared by the replicas (created when missing); used when --nats-url is set")
	fs.IntVar(&c.State.Replicas, "state-replicas", 1, "JetStream replicas of the state bucket when batch-poller creates it (3 on a NATS cluster)")
	fs.DurationVar(&c.State.TTL, "state-ttl", 7*24*time.Hour,
		"a run's record is dropped this long after its last write; longer than any vendor's batch window")
	fs.DurationVar(&c.PollBackoffMax, "batch-poll-backoff-max", 10*time.Minute,
		"cap of the wait between polls of a batch whose polls fail (each failure doubles the period up to it)")
	fs.StringVar(&c.AnthropicBaseURL, "anthropic-base-url", "", "Anthropic API base URL; the SDK default (https://api.anthropic.com) when empty")
	fs.StringVar(&c.OpenAIBaseURL, "openai-base-url", "", "OpenAI API base URL, ending in /v1; the SDK default (https://api.openai.com/v1) when empty")
	fs.StringVar(&c.GeminiBaseURL, "gemini-base-url", "", "Gemini API base URL; the SDK default when empty")
	fs.StringVar(&c.TokenAudience, "token-audience", DefaultTokenAudience,
		"audience a caller's ServiceAccount token must be issued for (checked with a TokenReview); a plain API token is refused")
	var callers, namespaces string
	fs.StringVar(&callers, "allowed-callers", "",
		"comma-separated usernames allowed to call BatchService, each system:serviceaccount:NAMESPACE:NAME (agent-controller's); required")
	fs.StringVar(&namespaces, "secret-namespaces", "",
		"comma-separated namespaces whose agent-secrets are read, one watch each; every namespace when empty (RBAC must match)")
	fs.Check(func() error {
		if !(pollSeconds > 0 && pollSeconds <= maxPollSeconds) {
			return fmt.Errorf("--batch-poll-seconds / BATCH_POLL_SECONDS must be a number of seconds in (0, %d], got %g", maxPollSeconds, pollSeconds)
		}
		c.PollPeriod = time.Duration(pollSeconds * float64(time.Second))
		return nil
	})
	fs.Check(func() error {
		if c.TokenAudience == "" {
			return fmt.Errorf("--token-audience / TOKEN_AUDIENCE must not be empty: without it any API token of an allowed caller is accepted")
		}
		c.AllowedCallers = splitList(callers)
		if len(c.AllowedCallers) == 0 {
			return fmt.Errorf("--allowed-callers / ALLOWED_CALLERS must name at least one caller (agent-controller's ServiceAccount)")
		}
		for _, u := range c.AllowedCallers {
			if parts := strings.Split(strings.TrimPrefix(u, saPrefix), ":"); !strings.HasPrefix(u, saPrefix) || len(parts) != 2 ||
				parts[0] == "" || parts[1] == "" {
				return fmt.Errorf("--allowed-callers / ALLOWED_CALLERS: %q is not %s<namespace>:<name>", u, saPrefix)
			}
		}
		c.SecretNamespaces = splitList(namespaces)
		for _, ns := range c.SecretNamespaces {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return fmt.Errorf("--secret-namespaces / SECRET_NAMESPACES: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
			}
		}
		return nil
	})
	fs.Check(func() error {
		// A credential that cannot be read is a startup error rather than
		// a connection refused later, in a loop, with no hint why.
		return c.NATS.Validate()
	})
	fs.Check(func() error {
		if !keyPart.MatchString(c.State.Bucket) {
			return fmt.Errorf("--state-bucket / STATE_BUCKET: %q is not a bucket name (letters, digits, - and _)", c.State.Bucket)
		}
		if c.State.Replicas < 1 || c.State.Replicas > 5 {
			return fmt.Errorf("--state-replicas / STATE_REPLICAS must be 1 to 5, got %d", c.State.Replicas)
		}
		if c.State.TTL < time.Hour {
			return fmt.Errorf("--state-ttl / STATE_TTL must be at least 1h (a record must outlive its batch), got %s", c.State.TTL)
		}
		if c.PollBackoffMax < c.PollPeriod {
			return fmt.Errorf("--batch-poll-backoff-max / BATCH_POLL_BACKOFF_MAX (%s) must not be shorter than the poll period (%s)", c.PollBackoffMax, c.PollPeriod)
		}
		return nil
	})
	fs.Check(func() error {
		if c.PollConcurrency < 1 {
			return fmt.Errorf("--batch-poll-concurrency / BATCH_POLL_CONCURRENCY must be at least 1, got %d", c.PollConcurrency)
		}
		return nil
	})
	return fs, c
}

// keyPart is what a JetStream bucket name may hold.
var keyPart = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Parse reads args (without the program name), then getenv for each flag
// not given. After --version or --help, which it prints to out, it
// returns service.ErrVersion or service.ErrHelp.
func Parse(args []string, getenv func(string) string, out io.Writer) (*Config, error) {
	return service.ParseConfig(newFlagSet, args, getenv, out)
}
