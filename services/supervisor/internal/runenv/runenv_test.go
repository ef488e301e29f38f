package runenv

import (
	"testing"
	"time"
)

func TestMillis(t *testing.T) {
	tests := []struct {
		name, in string
		want     time.Duration
	}{
		{"unset takes the default", "", time.Second},
		{"garbage takes the default", "soon", time.Second},
		{"zero takes the default", "0", time.Second},
		{"negative takes the default", "-5", time.Second},
		{"a count is milliseconds", "1500", 1500 * time.Millisecond},
		{"huge values are capped instead of overflowing", "99999999999999999", 365 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := millis(tt.in, time.Second); got != tt.want {
				t.Fatalf("millis(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestReadDefaultsAndFallbacks(t *testing.T) {
	env := map[string]string{"POD_NAMESPACE": "ns", "POD_NAME": "pod-1", "AGENT_NATS_URL": "nats://x"}
	e := Read(func(k string) string { return env[k] })
	if e.Namespace != "ns" || e.UID != "pod-1" || e.NATSURL != "nats://x" {
		t.Fatalf("fallbacks not applied: %+v", e)
	}
	if e.Workspace != DefaultWorkspace || e.Home != DefaultAgentDir || e.ExitGrace != DefaultExitGrace || e.Deadline != 0 || e.Execution != "job" {
		t.Fatalf("defaults not applied: %+v", e)
	}
}

// TestRealtimeSettings checks the realtime variables' defaults (the ones the
// controller relies on when it sets nothing) and overrides.
func TestRealtimeSettings(t *testing.T) {
	tests := []struct {
		name            string
		env             map[string]string
		addr, tokenFile string
		idle            time.Duration
	}{
		{"unset gives the well-known port, mount and idle limit", nil,
			":8090", "/var/run/agentplane/realtime/token", 15 * time.Minute},
		{"variables override each", map[string]string{"AGENT_REALTIME_ADDR": "127.0.0.1:0",
			"AGENT_REALTIME_TOKEN_FILE": "/tmp/t", "AGENT_REALTIME_IDLE_SECONDS": "7"},
			"127.0.0.1:0", "/tmp/t", 7 * time.Second},
		{"a non-positive idle limit takes the default", map[string]string{"AGENT_REALTIME_IDLE_SECONDS": "0"},
			":8090", "/var/run/agentplane/realtime/token", 15 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Read(func(k string) string { return tt.env[k] })
			if e.RealtimeAddr != tt.addr || e.RealtimeTokenFile != tt.tokenFile || e.RealtimeIdle != tt.idle {
				t.Fatalf("got addr %q, token file %q, idle %v", e.RealtimeAddr, e.RealtimeTokenFile, e.RealtimeIdle)
			}
		})
	}
}
