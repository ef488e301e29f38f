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
