// Package config reads the agent controller's configuration from flags,
// each with an environment fallback, and refuses bad values at startup with
// a message naming the flag or variable.
package config

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Config is the agent controller's configuration.
type Config struct {
	Kubeconfig      string
	Namespace       string
	LeaseNamespace  string
	Identity        string
	Addr            string
	MaxOutputBytes  int
	PollInterval    time.Duration
	Workers         int
	PageSize        int64
	SupervisorImage string
	SupervisorPath  string
	LeaderElect     bool
	LeaseDuration   time.Duration
	RenewDeadline   time.Duration
	RetryPeriod     time.Duration
	RealtimeEnabled bool
	// RealtimeKeyNamespace holds the key Secret shared with realtime-gateway.
	RealtimeKeyNamespace string
	// BatchEnabled accepts execution: batch (the components/batch deploy).
	BatchEnabled bool
	// BatchPollerAddr is batch-poller's gRPC address.
	BatchPollerAddr string
	// BatchPoll is how often a Running batch run is looked at.
	BatchPoll time.Duration
	// BatchTimeoutUnit is what one batch.timeoutMinutes counts (tests
	// shorten it).
	BatchTimeoutUnit time.Duration
	// BatchCleanupBackoff is the first wait before retrying a failed
	// batch cleanup.
	BatchCleanupBackoff time.Duration
	LogLevel            string
	NATSURL             string
	QPS                 float64
	Burst               int
}

// Parse reads args (without the program name) and env.
func Parse(args []string, getenv func(string) string) (*Config, error) {
	fs := flag.NewFlagSet("agent-controller", flag.ContinueOnError)
	c := &Config{}
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	identity := env("POD_NAME", env("HOSTNAME", "agent-controller"))
	fs.StringVar(&c.Kubeconfig, "kubeconfig", getenv("KUBECONFIG"), "kubeconfig file; in-cluster config when empty (env KUBECONFIG)")
	fs.StringVar(&c.Namespace, "namespace", getenv("WATCH_NAMESPACE"), "only reconcile Agents of this namespace; all when empty (env WATCH_NAMESPACE)")
	fs.StringVar(&c.LeaseNamespace, "lease-namespace", env("POD_NAMESPACE", "default"), "namespace of the agent-controller Lease (env POD_NAMESPACE)")
	fs.StringVar(&c.Identity, "identity", identity, "leader-election identity (env POD_NAME, then HOSTNAME)")
	fs.StringVar(&c.Addr, "addr", ":"+env("HEALTH_PORT", "8081"), "listen address of /metrics, /healthz and /readyz (env HEALTH_PORT sets the port)")
	maxOut := fs.String("max-output-bytes", env("MAX_OUTPUT_BYTES", "262144"), "cap of status.output in bytes (env MAX_OUTPUT_BYTES)")
	fs.DurationVar(&c.PollInterval, "poll-interval", mustDuration(env("POLL_INTERVAL", "15s")), "period of the full LIST that backs up the watch (env POLL_INTERVAL)")
	fs.IntVar(&c.Workers, "workers", mustInt(env("WORKERS", "4")), "Agents reconciled at once (env WORKERS)")
	fs.Int64Var(&c.PageSize, "page-size", 500, "LIST page size")
	fs.StringVar(&c.SupervisorImage, "supervisor-image", env("AGENT_IMAGE", "agentplane/supervisor:dev"), "image of the run pod's init container, carrying the supervisor bundle (env AGENT_IMAGE)")
	fs.StringVar(&c.SupervisorPath, "supervisor-path", env("SUPERVISOR_PATH", "/supervisor"), "path of the supervisor binary inside that image (env SUPERVISOR_PATH)")
	fs.BoolVar(&c.LeaderElect, "leader-elect", env("LEADER_ELECT", "true") == "true", "contend for the agent-controller Lease; only the holder reconciles (env LEADER_ELECT)")
	fs.DurationVar(&c.LeaseDuration, "lease-duration", 15*time.Second, "how long a Lease is valid without renewal")
	fs.DurationVar(&c.RenewDeadline, "renew-deadline", 10*time.Second, "how long the leader retries renewing before it steps down")
	fs.DurationVar(&c.RetryPeriod, "retry-period", 5*time.Second, "how often the Lease is renewed or contended")
	fs.BoolVar(&c.RealtimeEnabled, "realtime-enabled", env("REALTIME_ENABLED", "false") == "true", "accept execution: realtime (env REALTIME_ENABLED)")
	fs.StringVar(&c.RealtimeKeyNamespace, "realtime-key-namespace", env("POD_NAMESPACE", "default"), "namespace of the Secret agentplane-realtime-key shared with realtime-gateway (env POD_NAMESPACE)")
	fs.BoolVar(&c.BatchEnabled, "batch-enabled", env("BATCH_ENABLED", "false") == "true", "accept execution: batch, submitted through batch-poller (env BATCH_ENABLED)")
	fs.StringVar(&c.BatchPollerAddr, "batch-poller-addr", env("BATCH_POLLER_ADDR", "batch-poller:9090"), "gRPC address of batch-poller (env BATCH_POLLER_ADDR)")
	pollSeconds := fs.String("batch-poll-seconds", env("BATCH_POLL_SECONDS", "60"), "look at a Running batch run at most this often, in seconds, unless batch-poller announces its end (env BATCH_POLL_SECONDS)")
	fs.DurationVar(&c.BatchTimeoutUnit, "batch-timeout-unit", time.Minute, "length of one batch.timeoutMinutes; for tests only")
	fs.DurationVar(&c.BatchCleanupBackoff, "batch-cleanup-backoff", time.Second, "first wait before retrying a failed batch cleanup; doubles per attempt up to a minute")
	fs.StringVar(&c.NATSURL, "nats-url", getenv("NATS_URL"), "NATS server run pods publish their events to, as AGENT_NATS_URL; none when empty (env NATS_URL)")
	fs.Float64Var(&c.QPS, "kube-api-qps", 500, "client-side rate limit of requests to the API server, per second")
	fs.IntVar(&c.Burst, "kube-api-burst", 1000, "client-side burst of requests to the API server")
	fs.StringVar(&c.LogLevel, "log-level", env("LOG_LEVEL", "info"), "debug, info, warn or error (env LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(*maxOut)
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("MAX_OUTPUT_BYTES / --max-output-bytes must be a positive number of bytes, got %q", *maxOut)
	}
	c.MaxOutputBytes = n
	secs, err := strconv.ParseFloat(*pollSeconds, 64)
	if err != nil || secs <= 0 {
		return nil, fmt.Errorf("BATCH_POLL_SECONDS / --batch-poll-seconds must be a positive number of seconds, got %q", *pollSeconds)
	}
	c.BatchPoll = time.Duration(secs * float64(time.Second))
	if c.BatchTimeoutUnit <= 0 || c.BatchCleanupBackoff <= 0 {
		return nil, fmt.Errorf("--batch-timeout-unit and --batch-cleanup-backoff must be positive, got %s and %s", c.BatchTimeoutUnit, c.BatchCleanupBackoff)
	}
	if c.Workers < 1 {
		return nil, fmt.Errorf("WORKERS / --workers must be at least 1, got %d", c.Workers)
	}
	if c.PollInterval < time.Second {
		return nil, fmt.Errorf("POLL_INTERVAL / --poll-interval must be at least 1s, got %s", c.PollInterval)
	}
	if c.LeaderElect && (c.RetryPeriod >= c.RenewDeadline || c.RenewDeadline >= c.LeaseDuration) {
		return nil, fmt.Errorf("leader election needs --retry-period < --renew-deadline < --lease-duration, got %s, %s, %s", c.RetryPeriod, c.RenewDeadline, c.LeaseDuration)
	}
	return c, nil
}

// mustInt and mustDuration turn a malformed env value into a flag default
// that Parse then rejects with a clear message.
func mustInt(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-controller: ignoring malformed integer %q from the environment\n", s)
		return 0
	}
	return n
}

func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "agent-controller: ignoring malformed duration %q from the environment\n", s)
		return 0
	}
	return d
}
