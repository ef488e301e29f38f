// Package config reads the agent controller's configuration from flags,
// each with an environment fallback named by the one rule of libs/service,
// and refuses bad values at startup with a message naming the flag and its
// variable.
package config

import (
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentplane/agentplane/libs/grpcauth"
	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/service"
	"github.com/agentplane/agentplane/services/agent-controller/internal/controller"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
	"github.com/agentplane/agentplane/services/agent-controller/internal/runpolicy"
)

// Name is the service's name: its logger's, its User-Agent's and its
// build-info label.
const Name = "agent-controller"

// LeaseName is the default name of the leader-election Lease.
const LeaseName = "agent-controller"

// Config is the agent controller's configuration.
type Config struct {
	// Options are the skeleton's: logging, serving, the Kubernetes client,
	// the pod and leader election.
	service.Options
	// WatchNamespace limits reconciling to one namespace; all when empty.
	WatchNamespace string
	// MaxOutputBytes caps status.output.
	MaxOutputBytes int
	// PollInterval is the period of the poll that backs up the watch.
	PollInterval time.Duration
	// Workers is how many Agents are reconciled at once.
	Workers int
	// EventQPS and EventBurst limit the Kubernetes Events the controller
	// writes, on a client of their own (docs/configuration.md).
	EventQPS   float64
	EventBurst int
	// PageSize is the LIST page size.
	PageSize int64
	// SupervisorImage is the run pod's init container image.
	SupervisorImage string
	// SupervisorPath is the supervisor binary inside that image.
	SupervisorPath string
	// RealtimeEnabled accepts execution: realtime.
	RealtimeEnabled bool
	// RealtimeKeyNamespace holds the key Secret shared with
	// realtime-gateway; the pod's namespace when not set.
	RealtimeKeyNamespace string
	// BatchEnabled accepts execution: batch (the components/batch deploy).
	BatchEnabled bool
	// BatchPollerAddress is batch-poller's gRPC address.
	BatchPollerAddress string
	// BatchPollSeconds is --batch-poll-seconds; BatchPoll is the same as a
	// duration.
	BatchPollSeconds float64
	// BatchPoll is how often a Running batch run is looked at.
	BatchPoll time.Duration
	// BatchTimeoutUnit is what one batch.timeoutMinutes counts (tests
	// shorten it).
	BatchTimeoutUnit time.Duration
	// BatchCleanupBackoff is the first wait before retrying a failed
	// batch cleanup.
	BatchCleanupBackoff time.Duration
	// BatchPollerTokenFile holds the ServiceAccount token sent to
	// batch-poller (a projected token volume in a pod).
	BatchPollerTokenFile string
	// BatchPollerServiceAccount, namespace/name, is the ServiceAccount
	// whose token is requested for batch-poller outside a pod.
	BatchPollerServiceAccount string
	// BatchPollerTokenAudience is the audience requested for that token.
	BatchPollerTokenAudience string
	// NATSURL is the NATS server run pods publish their events to.
	NATSURL string
	// NATS is how the controller's own connection authenticates and
	// verifies the server (--nats-creds-file, --nats-ca-file, ...).
	NATS natsauth.Client
	// NATSAccountSeedFile holds the platform account's signing-key seed;
	// when set, every run gets its own NATS credential.
	NATSAccountSeedFile string
	// NATSAccount is the account's public key, needed when the seed is a
	// signing key rather than the account's own.
	NATSAccount string
	// NATSCredentialTTL is the life of a run's credential when its run has
	// no deadline to expire with.
	NATSCredentialTTL time.Duration
	// NATSIssuer mints the runs' credentials, loaded from
	// NATSAccountSeedFile at startup; nil without one.
	NATSIssuer *natsauth.Issuer
	// NATSCA is the content of --nats-ca-file, handed to each run with its
	// credential; nil without one.
	NATSCA []byte
	// PodSecurityLevel is the Pod Security Standards level every run pod
	// must meet (docs/agent-controller.md, "Pod security").
	PodSecurityLevel jobbuild.PodSecurityLevel
	// podSecurityLevel is the flag's text, parsed into PodSecurityLevel.
	podSecurityLevel string
	// RunNetworkPolicy gives every run pod a NetworkPolicy of its own
	// (internal/runpolicy, docs/security.md "NetworkPolicies").
	RunNetworkPolicy bool
	// GatewayNamespace is realtime-gateway's namespace, the only one a
	// realtime run's session port admits; the pod's namespace when not set.
	GatewayNamespace string
	// GatewayPodLabels select realtime-gateway's pods there, parsed from
	// gatewayPodLabels.
	GatewayPodLabels map[string]string
	// gatewayPodLabels is the flag's text.
	gatewayPodLabels string
}

// DefaultSupervisorImage is the supervisor image of this build: the
// images are tagged with the release, so a controller of version X runs
// supervisor X unless told otherwise ("dev" for an unstamped build).
func DefaultSupervisorImage() string {
	return "agentplane/supervisor:" + service.Version().Version
}

// NewFlagSet registers every flag of the agent controller on a FlagSet
// reading getenv, and returns the Config that parsing it fills.
func NewFlagSet(getenv func(string) string) (*service.FlagSet, *Config) {
	fs := service.NewFlagSet(Name, getenv)
	c := &Config{}
	// The HTTP shutdown and the NATS flush are all that is left to do
	// after SIGTERM, and both must fit in the pod's default 30 s grace.
	fs.AddServing(&c.Options, service.ServingDefaults{ShutdownTimeout: 10 * time.Second})
	fs.AddKube(&c.Kube, 500, 1000)
	fs.AddPod(&c.Pod)
	fs.AddLeaderElection(&c.LeaderElection, LeaseName)
	fs.StringVar(&c.WatchNamespace, "watch-namespace", "", "only reconcile Agents of this namespace; all namespaces when empty")
	fs.IntVar(&c.MaxOutputBytes, "max-output-bytes", 262144, "cap of status.output in bytes")
	fs.DurationVar(&c.PollInterval, "poll-interval", controller.DefaultPollInterval, "period of the poll that backs up the watch (a LIST of the Agents' metadata; of the Agents whole when the cache is behind); at least 1s")
	// Each reconcile mostly waits on the API server: with 4 workers a
	// burst's runs queue behind each other (docs/benchmarks.md).
	fs.IntVar(&c.Workers, "workers", controller.DefaultWorkers, "Agents reconciled at once")
	fs.Int64Var(&c.PageSize, "page-size", 500, "LIST page size")
	// An Event per transition is a third write per run beside the Job
	// and the status: on a client of their own, at the kubelet's default
	// event rate, they leave the rest of the API server's writes to runs.
	fs.Float64Var(&c.EventQPS, "event-qps", 50, "Kubernetes Events written per second at most, on a client of their own; past 1,000 waiting, Events are dropped and counted")
	fs.IntVar(&c.EventBurst, "event-burst", 100, "burst of Kubernetes Events above --event-qps")
	fs.StringVar(&c.SupervisorImage, "supervisor-image", DefaultSupervisorImage(),
		"image of the run pod's init container, carrying the supervisor bundle; agentplane/supervisor tagged with this binary's version by default")
	fs.StringVar(&c.SupervisorPath, "supervisor-path", "/supervisor", "path of the supervisor binary inside that image; the init container runs `<path> init`")
	fs.BoolVar(&c.RealtimeEnabled, "realtime-enabled", false, "accept execution: realtime")
	fs.StringVar(&c.RealtimeKeyNamespace, "realtime-key-namespace", "", "namespace of the Secret agentplane-realtime-key shared with realtime-gateway; the pod's namespace when empty")
	fs.BoolVar(&c.BatchEnabled, "batch-enabled", false, "accept execution: batch, submitted through batch-poller")
	fs.StringVar(&c.BatchPollerAddress, "batch-poller-address", "batch-poller:9090", "gRPC address of batch-poller")
	fs.Float64Var(&c.BatchPollSeconds, "batch-poll-seconds", 60, "look at a Running batch run at most this often, in seconds, unless batch-poller announces its end")
	fs.DurationVar(&c.BatchTimeoutUnit, "batch-timeout-unit", time.Minute, "length of one batch.timeoutMinutes; for tests only")
	fs.DurationVar(&c.BatchCleanupBackoff, "batch-cleanup-backoff", time.Second, "first wait before retrying a failed batch cleanup; doubles per attempt up to a minute")
	fs.StringVar(&c.BatchPollerTokenFile, "batch-poller-token-file", "",
		"file holding the ServiceAccount token sent to batch-poller on every call (a projected token volume with its audience), read again when rotated")
	fs.StringVar(&c.BatchPollerServiceAccount, "batch-poller-service-account", "",
		"outside a pod: namespace/name of the ServiceAccount whose token is requested (TokenRequest API) and renewed for batch-poller calls")
	fs.StringVar(&c.BatchPollerTokenAudience, "batch-poller-token-audience", "agentplane-batch-poller",
		"audience of the token requested for --batch-poller-service-account; batch-poller's --token-audience")
	fs.StringVar(&c.NATSURL, "nats-url", "", "NATS server run pods publish their events to (AGENT_NATS_URL in the run's environment); none when empty")
	c.NATS.AddFlags(fs)
	fs.StringVar(&c.NATSAccountSeedFile, "nats-account-seed-file", "",
		"file holding the seed of the NATS platform account's signing key (mounted from a Secret); when set, every run gets its own NATS credential, allowed to publish only its own events")
	fs.StringVar(&c.NATSAccount, "nats-account", "",
		"public key of the NATS platform account (starting with A); needed when --nats-account-seed-file holds a signing key rather than the account's own seed")
	fs.DurationVar(&c.NATSCredentialTTL, "nats-credential-ttl", 24*time.Hour,
		"life of a run's NATS credential when its run has no deadline; a run with one gets a credential that expires shortly after it")
	fs.StringVar(&c.podSecurityLevel, "pod-security-level", string(jobbuild.PodSecurityRestricted),
		"Pod Security Standards level every run pod must meet, restricted or baseline; a Job that breaks it fails its Agent")
	fs.BoolVar(&c.RunNetworkPolicy, "run-network-policy", true,
		"guard every run pod with its namespace's run NetworkPolicies, made sure of before its Job: realtime run pods admit only realtime-gateway's pods on their session port, Job run pods admit nothing")
	fs.StringVar(&c.GatewayNamespace, "gateway-namespace", "", "namespace of realtime-gateway, whose pods alone reach a realtime run's session port; the pod's namespace when empty")
	fs.StringVar(&c.gatewayPodLabels, "gateway-pod-labels", runpolicy.DefaultGatewayPodLabels,
		"labels of realtime-gateway's pods, key=value pairs separated by commas; all must match")
	fs.Check(c.validate)
	return fs, c
}

// validate refuses what the flag types let through, and fills the values
// derived from others.
func (c *Config) validate() error {
	if c.MaxOutputBytes <= 0 {
		return fmt.Errorf("--max-output-bytes / MAX_OUTPUT_BYTES must be a positive number of bytes, got %d", c.MaxOutputBytes)
	}
	if c.PollInterval < time.Second {
		return fmt.Errorf("--poll-interval / POLL_INTERVAL must be at least 1s, got %s", c.PollInterval)
	}
	if c.Workers < 1 {
		return fmt.Errorf("--workers / WORKERS must be at least 1, got %d", c.Workers)
	}
	if c.EventQPS <= 0 || c.EventBurst < 1 {
		return fmt.Errorf("--event-qps / EVENT_QPS and --event-burst / EVENT_BURST must be positive, got %g and %d", c.EventQPS, c.EventBurst)
	}
	if c.BatchPollSeconds <= 0 {
		return fmt.Errorf("--batch-poll-seconds / BATCH_POLL_SECONDS must be a positive number of seconds, got %g", c.BatchPollSeconds)
	}
	c.BatchPoll = time.Duration(c.BatchPollSeconds * float64(time.Second))
	if c.BatchTimeoutUnit <= 0 {
		return fmt.Errorf("--batch-timeout-unit / BATCH_TIMEOUT_UNIT must be positive, got %s", c.BatchTimeoutUnit)
	}
	if c.BatchCleanupBackoff <= 0 {
		return fmt.Errorf("--batch-cleanup-backoff / BATCH_CLEANUP_BACKOFF must be positive, got %s", c.BatchCleanupBackoff)
	}
	if c.SupervisorImage == "" || c.SupervisorPath == "" {
		return fmt.Errorf("--supervisor-image / SUPERVISOR_IMAGE and --supervisor-path / SUPERVISOR_PATH must not be empty")
	}
	if c.BatchEnabled && c.BatchPollerAddress == "" {
		return fmt.Errorf("--batch-poller-address / BATCH_POLLER_ADDRESS must not be empty when batch runs are enabled")
	}
	if err := c.validateBatchPollerToken(); err != nil {
		return err
	}
	level, err := jobbuild.ParsePodSecurityLevel(c.podSecurityLevel)
	if err != nil {
		return fmt.Errorf("--pod-security-level / POD_SECURITY_LEVEL: %w", err)
	}
	c.PodSecurityLevel = level
	if c.RealtimeKeyNamespace == "" {
		c.RealtimeKeyNamespace = c.Pod.Namespace
	}
	if err := c.validateRunNetworkPolicy(); err != nil {
		return err
	}
	return c.validateNATS()
}

// validateRunNetworkPolicy reads the gateway's labels and defaults its
// namespace to the pod's, where the charts install both.
func (c *Config) validateRunNetworkPolicy() error {
	if c.GatewayNamespace == "" {
		c.GatewayNamespace = c.Pod.Namespace
	}
	if errs := validation.IsDNS1123Label(c.GatewayNamespace); len(errs) > 0 {
		return fmt.Errorf("--gateway-namespace / GATEWAY_NAMESPACE %q: %s", c.GatewayNamespace, errs[0])
	}
	m, err := runpolicy.ParsePodLabels(c.gatewayPodLabels)
	if err != nil {
		return fmt.Errorf("--gateway-pod-labels / GATEWAY_POD_LABELS: %w", err)
	}
	c.GatewayPodLabels = m
	return nil
}

// validateNATS checks the controller's own NATS client files and loads the
// issuer of the runs' credentials, so that a bad seed stops the start
// instead of failing every run.
func (c *Config) validateNATS() error {
	if err := c.NATS.Validate(); err != nil {
		return fmt.Errorf("NATS client: %w", err)
	}
	if c.NATS.CAFile != "" {
		ca, err := os.ReadFile(c.NATS.CAFile)
		if err != nil {
			return fmt.Errorf("--nats-ca-file / NATS_CA_FILE: %w", err)
		}
		c.NATSCA = ca
	}
	if c.NATSCredentialTTL <= 0 {
		return fmt.Errorf("--nats-credential-ttl / NATS_CREDENTIAL_TTL must be positive, got %s", c.NATSCredentialTTL)
	}
	if c.NATSAccountSeedFile == "" {
		if c.NATSAccount != "" {
			return fmt.Errorf("--nats-account / NATS_ACCOUNT needs --nats-account-seed-file / NATS_ACCOUNT_SEED_FILE")
		}
		return nil
	}
	iss, err := natsauth.LoadIssuer(c.NATSAccountSeedFile, c.NATSAccount)
	if err != nil {
		// The error names what is wrong with the seed, never its content.
		return fmt.Errorf("--nats-account-seed-file / NATS_ACCOUNT_SEED_FILE with --nats-account / NATS_ACCOUNT: %w", err)
	}
	c.NATSIssuer = iss
	return nil
}

// validateBatchPollerToken refuses two token sources, or a ServiceAccount
// that is not namespace/name.
func (c *Config) validateBatchPollerToken() error {
	if c.BatchPollerTokenFile != "" && c.BatchPollerServiceAccount != "" {
		return fmt.Errorf("--batch-poller-token-file / BATCH_POLLER_TOKEN_FILE and --batch-poller-service-account / BATCH_POLLER_SERVICE_ACCOUNT exclude each other")
	}
	if c.BatchPollerServiceAccount == "" {
		return nil
	}
	if _, _, err := grpcauth.ParseServiceAccount(c.BatchPollerServiceAccount); err != nil {
		return fmt.Errorf("--batch-poller-service-account / BATCH_POLLER_SERVICE_ACCOUNT: %w", err)
	}
	if c.BatchPollerTokenAudience == "" {
		return fmt.Errorf("--batch-poller-token-audience / BATCH_POLLER_TOKEN_AUDIENCE must not be empty with --batch-poller-service-account")
	}
	return nil
}

// Parse reads args (without the program name) and then getenv into a
// Config; it is NewFlagSet and Parse for tests, with --help and --version
// written to out.
func Parse(args []string, getenv func(string) string, out io.Writer) (*Config, error) {
	fs, c := NewFlagSet(getenv)
	if err := fs.Parse(args, out); err != nil {
		return nil, err
	}
	return c, nil
}
