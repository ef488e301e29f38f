package run

import (
	"os"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/sinks"
	"github.com/agentplane/agentplane/services/supervisor/internal/runenv"
)

// TestTheCLIInheritsNoSupervisorSecrets: the CLI child runs whatever
// tools the agent calls, so what only the supervisor's own connections
// need (NATS, the realtime token, sink and store headers) stays out of its
// environment, and the rest of the environment reaches it.
func TestTheCLIInheritsNoSupervisorSecrets(t *testing.T) {
	set := map[string]string{
		runspec.EnvNATSURL:          "nats://nats:4222",
		runspec.EnvNATSURLOverride:  "nats://elsewhere:4222",
		runspec.EnvNATSCreds:        "-----BEGIN NATS USER JWT-----\n...",
		runspec.EnvNATSCAFile:       runspec.NATSMountDir + "/" + runspec.NATSCAKey,
		realtime.EnvToken:           "the run's token",
		sinks.EnvSinks:              `[{"type":"http","url":"https://hook","headers_secret":"hook-auth"}]`,
		"hook-auth":                 "Authorization: Bearer x",
		runspec.EnvConversationAuth: "store-auth",
		"store-auth":                "Authorization: Bearer y",
		"ANTHROPIC_API_KEY":         "the CLI's own",
		runspec.EnvAgentName:        "a",
	}
	for k, v := range set {
		t.Setenv(k, v)
	}
	got := map[string]string{}
	for _, kv := range childEnv(runenv.Read(os.Getenv)) {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	cases := []struct {
		rule string
		name string
		kept bool
	}{
		{"the NATS URL is the supervisor's", runspec.EnvNATSURL, false},
		{"the NATS URL override is the supervisor's", runspec.EnvNATSURLOverride, false},
		{"the run's NATS credential is the supervisor's", runspec.EnvNATSCreds, false},
		{"the NATS CA is the supervisor's", runspec.EnvNATSCAFile, false},
		{"a realtime run's token is the supervisor's", realtime.EnvToken, false},
		{"a sink's header secret is the supervisor's", "hook-auth", false},
		{"the conversation store's header secret is the supervisor's", "store-auth", false},
		{"the vendor's key reaches the CLI", "ANTHROPIC_API_KEY", true},
		{"the run identity reaches the CLI", runspec.EnvAgentName, true},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if _, ok := got[c.name]; ok != c.kept {
				t.Errorf("%s in the CLI's environment: %v, want %v", c.name, ok, c.kept)
			}
		})
	}
}
