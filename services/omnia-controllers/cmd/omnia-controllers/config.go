package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// config is the binary's configuration: flags, each with an environment
// variable fallback used when the flag is not given.
type config struct {
	MetricsAddr             string
	ProbeAddr               string
	LeaderElect             bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	RuntimeImage            string
	RuntimeCommand          []string
	RuntimePullPolicy       corev1.PullPolicy
	ProbeCredentials        bool
	LogLevel                slog.Level
	ShutdownTimeout         time.Duration
	// repeatedInProcess lets tests run the manager more than once in one
	// process; no flag sets it.
	repeatedInProcess bool
	// PrometheusURL is the Prometheus HTTP API rollout analysis queries;
	// empty when there is none.
	PrometheusURL string
}

// option documents one flag; the table is also what docs list.
type option struct {
	flag, env, def, usage string
}

var options = []option{
	{"metrics-bind-address", "METRICS_BIND_ADDRESS", ":8080", "address of the Prometheus /metrics endpoint; 0 turns it off"},
	{"health-probe-bind-address", "HEALTH_PROBE_BIND_ADDRESS", ":8081", "address of /healthz and /readyz"},
	{"leader-elect", "LEADER_ELECT", "true", "elect a leader on a coordination.k8s.io Lease so only one replica reconciles"},
	{"leader-election-id", "LEADER_ELECTION_ID", "omnia-controllers.agentplane.dev", "name of the leader election Lease"},
	{"leader-election-namespace", "LEADER_ELECTION_NAMESPACE", "", "namespace of the Lease; the pod's namespace when empty"},
	{"runtime-image", "OMNIA_RUNTIME_IMAGE", "ghcr.io/agentplane/omnia-runtime:latest", "runtime container image of promptkit agents (spec.framework.image overrides it)"},
	{"runtime-command", "OMNIA_RUNTIME_COMMAND", "", "comma-separated command of the runtime container; the image's entrypoint when empty"},
	{"runtime-image-pull-policy", "OMNIA_RUNTIME_IMAGE_PULL_POLICY", "IfNotPresent", "pull policy of the runtime container: Always, IfNotPresent or Never"},
	{"provider-credential-probe", "PROVIDER_CREDENTIAL_PROBE", "true", "probe Provider API keys with the vendor (openai, claude, gemini)"},
	{"log-level", "LOG_LEVEL", "info", "debug, info, warn or error"},
	{"graceful-shutdown-timeout", "GRACEFUL_SHUTDOWN_TIMEOUT", "30s", "how long running reconciles may finish after SIGTERM"},
	{"prometheus-url", "OMNIA_PROMETHEUS_URL", "", "Prometheus HTTP API address that rollout analysis steps query; without it analysis steps hold"},
}

// parseConfig reads flags from args, falling back to env for flags not
// given. Bad values are errors naming the flag and its variable.
func parseConfig(fs *flag.FlagSet, args []string, env func(string) string) (config, error) {
	vals := map[string]*string{}
	for _, o := range options {
		v := o.def
		vals[o.flag] = &v
		val := flag.Value(stringValue{&v})
		if o.def == "true" || o.def == "false" {
			val = boolValue{stringValue{&v}}
		}
		fs.Var(val, o.flag, fmt.Sprintf("%s (env %s)", o.usage, o.env))
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, o := range options {
		if v := env(o.env); v != "" && !given[o.flag] {
			*vals[o.flag] = v
		}
	}
	get := func(name string) string { return *vals[name] }
	c := config{
		MetricsAddr:             get("metrics-bind-address"),
		ProbeAddr:               get("health-probe-bind-address"),
		LeaderElectionID:        get("leader-election-id"),
		LeaderElectionNamespace: get("leader-election-namespace"),
		RuntimeImage:            get("runtime-image"),
		RuntimePullPolicy:       corev1.PullPolicy(get("runtime-image-pull-policy")),
		PrometheusURL:           get("prometheus-url"),
	}
	if u := c.PrometheusURL; u != "" {
		// The URL may carry credentials, so the error does not repeat it.
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return c, fmt.Errorf("--prometheus-url (OMNIA_PROMETHEUS_URL): want an absolute http or https URL")
		}
	}
	var err error
	if c.LeaderElect, err = parseBool("leader-elect", get); err != nil {
		return c, err
	}
	if c.ProbeCredentials, err = parseBool("provider-credential-probe", get); err != nil {
		return c, err
	}
	for _, part := range strings.Split(get("runtime-command"), ",") {
		if p := strings.TrimSpace(part); p != "" {
			c.RuntimeCommand = append(c.RuntimeCommand, p)
		}
	}
	switch c.RuntimePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return c, fmt.Errorf("--runtime-image-pull-policy (OMNIA_RUNTIME_IMAGE_PULL_POLICY): %q is not Always, IfNotPresent or Never", c.RuntimePullPolicy)
	}
	if err := c.LogLevel.UnmarshalText([]byte(get("log-level"))); err != nil {
		return c, fmt.Errorf("--log-level (LOG_LEVEL): %w", err)
	}
	if c.ShutdownTimeout, err = time.ParseDuration(get("graceful-shutdown-timeout")); err != nil {
		return c, fmt.Errorf("--graceful-shutdown-timeout (GRACEFUL_SHUTDOWN_TIMEOUT): %w", err)
	}
	return c, nil
}

func parseBool(name string, get func(string) string) (bool, error) {
	b, err := strconv.ParseBool(get(name))
	if err != nil {
		env := ""
		for _, o := range options {
			if o.flag == name {
				env = o.env
			}
		}
		return false, fmt.Errorf("--%s (%s): %w", name, env, err)
	}
	return b, nil
}

// envLookup is os.Getenv, a variable so tests can pass their own.
var envLookup = os.Getenv

// stringValue is a flag holding its text, parsed after the environment
// fallback is applied.
type stringValue struct{ p *string }

func (v stringValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v stringValue) Set(s string) error { *v.p = s; return nil }

// boolValue lets a boolean flag be given bare ("--leader-elect").
type boolValue struct{ stringValue }

func (boolValue) IsBoolFlag() bool { return true }
