package run

import (
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/runspec"
)

func TestNATSFlush(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		name       string
		origin     time.Time
		deadline   time.Duration
		terminated bool
		want       time.Duration
	}{
		{name: "without a deadline NATS gets the longest wait", want: maxNATSFlush},
		{name: "a run that ended far inside its deadline waits the longest for NATS", origin: now, deadline: time.Hour, want: maxNATSFlush},
		{name: "a near deadline cuts the wait to end a second before the Job's",
			origin: now.Add(-time.Hour), deadline: time.Hour + 20*time.Second, want: 20*time.Second + runspec.DeadlineMargin - time.Second},
		{name: "the wait is never shorter than the sinks'", origin: now.Add(-2 * time.Hour), deadline: time.Hour, want: flushTimeout},
		{name: "a pod being stopped waits only the sinks' time, inside the kubelet's grace", origin: now, deadline: time.Hour, terminated: true, want: flushTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := natsFlush(now, tt.origin, tt.deadline, tt.terminated); got != tt.want {
				t.Fatalf("natsFlush = %v, want %v", got, tt.want)
			}
		})
	}
}
