// Package config reads the realtime-gateway's configuration from flags,
// each with an environment fallback, and refuses bad values at startup with
// a message naming the flag.
package config

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// Config is the realtime-gateway's configuration.
type Config struct {
	// Kubeconfig is used instead of the in-cluster config when set.
	Kubeconfig string
	// GRPCAddr serves PromptService, health and reflection.
	GRPCAddr string
	// MetricsAddr serves /metrics, /healthz and /readyz.
	MetricsAddr string
	// TLSCert and TLSKey, both or neither, make the gRPC port serve TLS.
	TLSCert, TLSKey string
	// KeySecretNamespace holds the shared key Secret.
	KeySecretNamespace string
	// ShutdownGrace is how long in-flight streams may run after SIGTERM.
	ShutdownGrace time.Duration
	// DialTimeout bounds connecting to a run pod.
	DialTimeout time.Duration
	// IdleConnTimeout closes a pod connection unused for this long.
	IdleConnTimeout time.Duration
	// AuthCacheTTL is how long an accepted token or an allowed access
	// review is reused; DeniedCacheTTL the same for denied reviews.
	AuthCacheTTL, DeniedCacheTTL time.Duration
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// QPS and Burst bound the gateway's Kubernetes API requests.
	QPS   float64
	Burst int
}

// Parse reads args (without the program name) and env.
func Parse(args []string, getenv func(string) string) (*Config, error) {
	fs := flag.NewFlagSet("realtime-gateway", flag.ContinueOnError)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	c := &Config{}
	var grace, dial, idle, authTTL, deniedTTL string
	fs.StringVar(&c.Kubeconfig, "kubeconfig", getenv("KUBECONFIG"), "kubeconfig file; in-cluster config when empty (env KUBECONFIG)")
	fs.StringVar(&c.GRPCAddr, "grpc-addr", env("GATEWAY_GRPC_ADDR", ":9443"), "listen address of PromptService, gRPC health and reflection (env GATEWAY_GRPC_ADDR)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", env("GATEWAY_METRICS_ADDR", ":8081"), "listen address of /metrics, /healthz and /readyz (env GATEWAY_METRICS_ADDR)")
	fs.StringVar(&c.TLSCert, "tls-cert", getenv("GATEWAY_TLS_CERT"), "PEM certificate for the gRPC port; plain TCP when empty (env GATEWAY_TLS_CERT)")
	fs.StringVar(&c.TLSKey, "tls-key", getenv("GATEWAY_TLS_KEY"), "PEM key of --tls-cert (env GATEWAY_TLS_KEY)")
	fs.StringVar(&c.KeySecretNamespace, "key-secret-namespace", env("POD_NAMESPACE", "agentplane-system"), "namespace of the agentplane-realtime-key Secret (env POD_NAMESPACE)")
	fs.StringVar(&grace, "shutdown-grace", env("GATEWAY_SHUTDOWN_GRACE", "30s"), "how long in-flight prompt streams may run after SIGTERM (env GATEWAY_SHUTDOWN_GRACE)")
	fs.StringVar(&dial, "dial-timeout", env("GATEWAY_DIAL_TIMEOUT", "5s"), "how long connecting to a run pod may take (env GATEWAY_DIAL_TIMEOUT)")
	fs.StringVar(&idle, "idle-conn-timeout", env("GATEWAY_IDLE_CONN_TIMEOUT", "5m"), "close a run pod connection unused this long (env GATEWAY_IDLE_CONN_TIMEOUT)")
	fs.StringVar(&authTTL, "auth-cache-ttl", env("GATEWAY_AUTH_CACHE_TTL", "10s"), "reuse an accepted token or an allowed access review this long (env GATEWAY_AUTH_CACHE_TTL)")
	fs.StringVar(&deniedTTL, "denied-cache-ttl", env("GATEWAY_DENIED_CACHE_TTL", "2s"), "reuse a denied access review this long (env GATEWAY_DENIED_CACHE_TTL)")
	fs.StringVar(&c.LogLevel, "log-level", env("LOG_LEVEL", "info"), "debug, info, warn or error (env LOG_LEVEL)")
	fs.Float64Var(&c.QPS, "kube-api-qps", 50, "Kubernetes API requests per second")
	fs.IntVar(&c.Burst, "kube-api-burst", 100, "Kubernetes API request burst")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, d := range []struct {
		flag, val string
		out       *time.Duration
		zeroOK    bool
	}{
		{"--shutdown-grace", grace, &c.ShutdownGrace, true},
		{"--dial-timeout", dial, &c.DialTimeout, false},
		{"--idle-conn-timeout", idle, &c.IdleConnTimeout, false},
		{"--auth-cache-ttl", authTTL, &c.AuthCacheTTL, true},
		{"--denied-cache-ttl", deniedTTL, &c.DeniedCacheTTL, true},
	} {
		v, err := time.ParseDuration(d.val)
		if err != nil || v < 0 || (v == 0 && !d.zeroOK) {
			return nil, fmt.Errorf("%s: %q is not a positive duration", d.flag, d.val)
		}
		*d.out = v
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if c.KeySecretNamespace == "" {
		return nil, errors.New("--key-secret-namespace: empty")
	}
	return c, nil
}
