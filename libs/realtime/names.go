package realtime

import "time"

// The shared key: one Secret in the platform's namespace, mounted or read by
// the agent-controller (to fill each run's token Secret) and by the
// realtime-gateway (to call the run pods). Neither ever logs it.
const (
	// KeySecretName is the Secret holding the shared key.
	KeySecretName = "agentplane-realtime-key"
	// KeySecretKey is the entry of KeySecretName holding the key's bytes
	// (at least MinKeyBytes, e.g. 32 random bytes).
	KeySecretKey = "key"
)

// The per-run token: the controller puts it in a Secret owned by the
// Agent, so it is garbage-collected with the run and is not in the Job or
// Pod spec, and passes that Secret's entry to the supervisor's environment
// through secretKeyRef: never a file, which the CLI (same uid) could read,
// and never the CLI's environment (docs/security.md).
const (
	// TokenSecretPrefix begins the name of a run's token Secret; see
	// TokenSecretName.
	TokenSecretPrefix = "agentplane-rt-"
	// TokenSecretKey is the entry of the token Secret holding the token.
	TokenSecretKey = "token"
	// EnvToken is the variable the supervisor reads the token from.
	EnvToken = "AGENT_REALTIME_TOKEN"
)

// TokenSecretName names the token Secret of the run whose Agent has uid.
// The uid rather than the Agent's name keeps the name short and valid
// whatever the Agent is called, and keeps a recreated same-named Agent from
// ever meeting the previous run's Secret.
func TokenSecretName(uid string) string { return TokenSecretPrefix + uid }

// The session server in the run pod.
const (
	// Port is where the supervisor of a realtime run serves
	// agentplane.supervisor.v1.SessionService, health and reflection.
	Port = 8090
	// PortName names Port on the container, so the gateway can look it up.
	PortName = "realtime"
	// DefaultAddr is the supervisor's listen address.
	DefaultAddr = ":8090"
	// EnvAddr overrides DefaultAddr (tests listen on loopback).
	EnvAddr = "AGENT_REALTIME_ADDR"
	// EnvIdleSeconds is how long, in whole seconds, a session may wait
	// for a prompt before it ends by itself; unset or not positive means
	// DefaultIdle.
	EnvIdleSeconds = "AGENT_REALTIME_IDLE_SECONDS"
	// DefaultIdle is the idle limit when EnvIdleSeconds does not set one:
	// long enough to read an answer and type the next prompt, short
	// enough that a forgotten session does not hold a pod for hours.
	DefaultIdle = 15 * time.Minute
	// MetadataKey is the gRPC metadata entry that may carry the run's
	// token instead of the request's token field.
	MetadataKey = "x-agentplane-run-token"
)

// MaxPromptBytes bounds a prompt's text: it becomes one argument of the
// CLI's command line, and Linux refuses any single argument of 128 KiB or
// more (MAX_ARG_STRLEN); the rest is headroom for a flag glued to it.
const MaxPromptBytes = 120 << 10
