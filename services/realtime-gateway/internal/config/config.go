// Package config reads the realtime-gateway's configuration from flags,
// each with the environment fallback libs/service derives from its name,
// and refuses bad values at startup with a message naming the flag and
// variable.
package config

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentplane/agentplane/libs/service"
)

// Name is the service's name in logs, metrics and --version.
const Name = "realtime-gateway"

// DefaultTokenAudience is the audience a caller's token must be issued for
// unless --token-audiences says otherwise, and the one agentctl asks for.
// On by default, so that a gateway started without flags (the kustomize
// manifests, the local stack) already refuses plain API tokens: a caller
// never has to hand the gateway a token good for the whole API.
const DefaultTokenAudience = "agentplane-realtime-gateway"

// Config is the realtime-gateway's configuration; the flag table in
// docs/realtime-gateway.md is generated from newFlagSet.
type Config struct {
	// Options are the skeleton's: log level, metrics and probe addresses,
	// shutdown timeout (how long in-flight streams may run after SIGTERM),
	// Kubernetes client, pod, gRPC address.
	service.Options
	// TLSCertFile and TLSPrivateKeyFile, both or neither, make the gRPC
	// port serve TLS; the pair is read again when the files change.
	TLSCertFile, TLSPrivateKeyFile string
	// TokenAudiences are asked of each TokenReview: a caller's token must
	// be issued for one of them. Empty accepts the apiserver's own
	// audiences, i.e. plain API tokens.
	TokenAudiences []string
	// KeySecretNamespace holds the shared key Secret: the flag's value,
	// else the pod's namespace.
	KeySecretNamespace string
	// DialTimeout bounds connecting to a run pod.
	DialTimeout time.Duration
	// IdleConnTimeout closes a pod connection unused for this long.
	IdleConnTimeout time.Duration
	// AuthCacheTTL is how long an accepted token or an allowed access
	// review is reused; DeniedCacheTTL the same for denied reviews.
	AuthCacheTTL, DeniedCacheTTL time.Duration
}

// newFlagSet registers every flag of the gateway on a FlagSet reading
// getenv, with the checks that run after parsing.
func newFlagSet(getenv func(string) string) (*service.FlagSet, *Config) {
	fs := service.NewFlagSet(Name, getenv)
	c := &Config{}
	fs.AddServing(&c.Options, service.ServingDefaults{Metrics: ":8080", Health: ":8081", ShutdownTimeout: 30 * time.Second})
	fs.AddKube(&c.Kube, 50, 100)
	fs.AddPod(&c.Pod)
	fs.AddGRPC(&c.GRPCBindAddress, ":9443")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "PEM certificate of the gRPC port, read again when it changes; plain TCP when empty (terminate TLS in front then)")
	fs.StringVar(&c.TLSPrivateKeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file")
	var audiences string
	fs.StringVar(&audiences, "token-audiences", DefaultTokenAudience,
		"comma-separated audiences a caller's token must be issued for; an explicit empty value accepts plain API tokens")
	fs.StringVar(&c.KeySecretNamespace, "key-secret-namespace", "", "namespace of the agentplane-realtime-key Secret; the pod's namespace when empty")
	fs.DurationVar(&c.DialTimeout, "dial-timeout", 5*time.Second, "bound on connecting to a run pod")
	fs.DurationVar(&c.IdleConnTimeout, "idle-conn-timeout", 5*time.Minute, "close a run pod connection unused this long")
	fs.DurationVar(&c.AuthCacheTTL, "auth-cache-ttl", 10*time.Second, "reuse an accepted TokenReview or an allowed SubjectAccessReview this long (0: never)")
	fs.DurationVar(&c.DeniedCacheTTL, "denied-cache-ttl", 2*time.Second, "reuse a denied SubjectAccessReview this long (0: never)")
	fs.Check(func() error {
		for _, d := range []struct {
			flag   string
			v      time.Duration
			zeroOK bool
		}{
			{"dial-timeout", c.DialTimeout, false},
			{"idle-conn-timeout", c.IdleConnTimeout, false},
			{"auth-cache-ttl", c.AuthCacheTTL, true},
			{"denied-cache-ttl", c.DeniedCacheTTL, true},
		} {
			if d.v < 0 || (d.v == 0 && !d.zeroOK) {
				want := "positive"
				if d.zeroOK {
					want = "zero or positive"
				}
				return fmt.Errorf("--%s / %s must be %s, got %s", d.flag, service.EnvName(d.flag), want, d.v)
			}
		}
		return nil
	})
	fs.Check(func() error {
		if (c.TLSCertFile == "") != (c.TLSPrivateKeyFile == "") {
			return fmt.Errorf("--tls-cert-file / TLS_CERT_FILE and --tls-private-key-file / TLS_PRIVATE_KEY_FILE go together: set both or neither")
		}
		return nil
	})
	fs.Check(func() error {
		c.TokenAudiences = nil
		if audiences == "" {
			return nil
		}
		for _, a := range strings.Split(audiences, ",") {
			if a = strings.TrimSpace(a); a == "" {
				return fmt.Errorf("--token-audiences / TOKEN_AUDIENCES %q has an empty entry", audiences)
			}
			c.TokenAudiences = append(c.TokenAudiences, a)
		}
		return nil
	})
	fs.Check(func() error {
		if c.KeySecretNamespace == "" {
			c.KeySecretNamespace = c.Pod.Namespace
		}
		if c.KeySecretNamespace == "" {
			return fmt.Errorf("--key-secret-namespace / KEY_SECRET_NAMESPACE and --pod-namespace / POD_NAMESPACE are both empty")
		}
		return nil
	})
	return fs, c
}

// Parse reads args (without the program name), then getenv for each flag
// not given. After --version or --help, which it prints to out, it
// returns service.ErrVersion or service.ErrHelp.
func Parse(args []string, getenv func(string) string, out io.Writer) (*Config, error) {
	return service.ParseConfig(newFlagSet, args, getenv, out)
}
