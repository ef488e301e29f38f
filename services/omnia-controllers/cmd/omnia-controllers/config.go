package main

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentplane/agentplane/libs/service"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/activator"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/agentruntime"
)

// name is the service's name: its logger's, its User-Agent's and its
// build-info label.
const name = "omnia-controllers"

// leaseName is the default name of the leader-election Lease.
const leaseName = "omnia-controllers.agentplane.dev"

// config is the binary's configuration: flags, each falling back to the
// environment variable libs/service's one rule names.
type config struct {
	// Options are the skeleton's: logging, serving, the Kubernetes client,
	// the pod and leader election.
	service.Options
	// RuntimeImage is the runtime container image of promptkit agents.
	RuntimeImage string
	// RuntimeCommand is the runtime container's command; the image's
	// entrypoint when empty.
	RuntimeCommand []string
	// RuntimePullPolicy is the pull policy of the runtime and facade
	// containers.
	RuntimePullPolicy corev1.PullPolicy
	// FacadeImage is the agents' facade container image.
	FacadeImage string
	// FacadeCommand is the facade container's command; the image's
	// entrypoint when empty.
	FacadeCommand []string
	// ProbeCredentials probes Provider API keys with the vendor.
	ProbeCredentials bool
	// ProbeOverHTTP lets the probe use plain http to loopback and
	// cluster-local hosts.
	ProbeOverHTTP bool
	// PrometheusURL is the Prometheus HTTP API rollout analysis queries;
	// empty when there is none.
	PrometheusURL string
	// ActivatorAddress is this pod's IP, where reaped agents' Services
	// are routed so their next session wakes them; empty: no activator.
	ActivatorAddress string
	// ActivatorPort is the activator's listen port.
	ActivatorPort int
	// ActivatorTimeout bounds a request's wait for a woken agent's pod.
	ActivatorTimeout time.Duration
	// ClusterDomain is the cluster DNS domain of Service host names.
	ClusterDomain string
	// runtimeCommand, facadeCommand and pullPolicy hold the flags' text
	// until checked.
	runtimeCommand, facadeCommand, pullPolicy string
	// repeatedInProcess lets tests run the manager more than once in one
	// process; no flag sets it.
	repeatedInProcess bool
}

// newFlagSet registers every flag of the binary on a FlagSet reading
// getenv, and returns the config that parsing it fills.
func newFlagSet(getenv func(string) string) (*service.FlagSet, *config) {
	fs := service.NewFlagSet(name, getenv)
	c := &config{}
	fs.AddServing(&c.Options, service.ServingDefaults{})
	// controller-runtime's own defaults, which this binary used before it
	// had the flags.
	fs.AddKube(&c.Kube, 20, 30)
	fs.AddPod(&c.Pod)
	fs.AddLeaderElection(&c.LeaderElection, leaseName)
	fs.StringVar(&c.RuntimeImage, "runtime-image", "ghcr.io/agentplane/omnia-runtime:latest", "runtime container image of promptkit agents (spec.framework.image overrides it)")
	fs.StringVar(&c.runtimeCommand, "runtime-command", "", "comma-separated command of the runtime container; the image's entrypoint when empty")
	fs.StringVar(&c.pullPolicy, "runtime-image-pull-policy", string(corev1.PullIfNotPresent), "pull policy of the runtime and facade containers: Always, IfNotPresent or Never")
	fs.StringVar(&c.FacadeImage, "facade-image", "ghcr.io/agentplane/omnia-facade:latest", "facade container image of every agent (spec.facades[].image of the primary facade overrides it)")
	fs.StringVar(&c.facadeCommand, "facade-command", "", "comma-separated command of the facade container; the image's entrypoint when empty")
	fs.BoolVar(&c.ProbeCredentials, "provider-credential-probe", true, "probe Provider API keys with the vendor (openai, claude, gemini)")
	fs.BoolVar(&c.ProbeOverHTTP, "provider-probe-allow-http", false, "let the credential probe send a key over plain http, to loopback and cluster-local (*.svc) hosts only; otherwise only over https")
	fs.StringVar(&c.PrometheusURL, "prometheus-url", "", "Prometheus HTTP API address that rollout analysis steps query; without it analysis steps hold")
	fs.StringVar(&c.ActivatorAddress, "activator-address", "", "this pod's IP (the downward API's status.podIP): reaped agents' Services are routed here so their next session wakes them; empty: no activator, only the wake annotation wakes a reaped agent")
	fs.IntVar(&c.ActivatorPort, "activator-port", agentruntime.DefaultActivatorPort, "port of the activator's listener (with --activator-address)")
	fs.DurationVar(&c.ActivatorTimeout, "activator-timeout", activator.DefaultTimeout, "how long a request to a reaped agent waits for a Ready pod before a 503 with Retry-After")
	fs.StringVar(&c.ClusterDomain, "cluster-domain", activator.DefaultClusterDomain, "cluster DNS domain of the Service host names the activator accepts")
	fs.Check(c.validate)
	return fs, c
}

// validate refuses what the flag types let through, and fills the values
// derived from the flags' text.
func (c *config) validate() error {
	if u := c.PrometheusURL; u != "" {
		// The URL may carry credentials, so the error does not repeat it.
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("--prometheus-url / PROMETHEUS_URL: want an absolute http or https URL")
		}
	}
	if a := c.ActivatorAddress; a != "" {
		// EndpointSlices name it: the API server refuses a loopback one.
		if ip := net.ParseIP(a); ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
			return fmt.Errorf("--activator-address / ACTIVATOR_ADDRESS: %q is not a pod IP address", a)
		}
	}
	if c.ActivatorPort < 1 || c.ActivatorPort > 65535 {
		return fmt.Errorf("--activator-port / ACTIVATOR_PORT: %d is not a port", c.ActivatorPort)
	}
	if c.ActivatorTimeout <= 0 {
		return fmt.Errorf("--activator-timeout / ACTIVATOR_TIMEOUT: want a positive duration")
	}
	c.RuntimeCommand, c.FacadeCommand = splitCommand(c.runtimeCommand), splitCommand(c.facadeCommand)
	c.RuntimePullPolicy = corev1.PullPolicy(c.pullPolicy)
	switch c.RuntimePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return fmt.Errorf("--runtime-image-pull-policy / RUNTIME_IMAGE_PULL_POLICY: %q is not Always, IfNotPresent or Never", c.RuntimePullPolicy)
	}
	return nil
}

// parseConfig reads args (without the program name) and then getenv; it is
// newFlagSet and Parse, with --help and --version written to out.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (*config, error) {
	fs, c := newFlagSet(getenv)
	if err := fs.Parse(args, out); err != nil {
		return nil, err
	}
	return c, nil
}

// splitCommand splits a comma-separated command, dropping empty parts;
// nil when none is left.
func splitCommand(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}
